//! Chaos: stdio and HTTP servers under sustained concurrent calls while servers and their
//! children are killed with `SIGKILL`, servers are disabled and enabled, and HTTP servers go
//! away and come back. Every call must settle by its deadline with a result or a typed error,
//! every server must be ready again afterwards, nothing may be left running, and the host's
//! metrics must agree with what the callers saw.
//!
//! Short by default (the test command runs it); `scripts/chaos.sh` runs it long and bigger
//! through `CHAOS_SECONDS`, `CHAOS_SERVERS`, `CHAOS_HTTP` and `CHAOS_CALLERS`. The figures
//! are printed and written to `chaos.json` in cargo's temporary directory for tests.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use plurnk_mcp::{CallError, CallOptions, Host, HostOptions, RestartPolicy, ServerState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[path = "support/env.rs"]
mod env;
#[path = "support/processes.rs"]
mod processes;
#[path = "support/wait.rs"]
mod wait;
use env::EXE;
use processes::marked;

/// The host's counters, as `name{label=value,...}` → count.
#[derive(Default)]
struct Counters(Mutex<BTreeMap<String, Arc<AtomicU64>>>);

struct CounterCell(Arc<AtomicU64>);

impl metrics::CounterFn for CounterCell {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
    }
    fn absolute(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }
}

impl metrics::Recorder for Counters {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let labels: Vec<String> = key
            .labels()
            .map(|label| format!("{}={}", label.key(), label.value()))
            .collect();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        let cell = match self.0.lock() {
            Ok(mut counters) => counters.entry(name).or_default().clone(),
            Err(_) => Arc::default(),
        };
        metrics::Counter::from_arc(Arc::new(CounterCell(cell)))
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

fn counters() -> &'static Counters {
    static COUNTERS: OnceLock<&'static Counters> = OnceLock::new();
    COUNTERS.get_or_init(|| {
        let counters: &'static Counters = Box::leak(Box::default());
        let _ = metrics::set_global_recorder(counters);
        counters
    })
}

fn counter(name: &str) -> u64 {
    counters()
        .0
        .lock()
        .ok()
        .and_then(|counters| counters.get(name).map(|c| c.load(Ordering::Relaxed)))
        .unwrap_or(0)
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// An in-process Streamable HTTP fixture on a fixed loopback port, which can go away and
/// come back at the same address.
struct HttpServer {
    address: std::net::SocketAddr,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl HttpServer {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let mut server = Self {
            address,
            stop: CancellationToken::new(),
            task: None,
        };
        server.serve(listener);
        server
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        self.stop = CancellationToken::new();
        self.task = Some(tokio::spawn(plurnk_mcp_fixture::serve_http(
            listener,
            plurnk_mcp_fixture::FixtureOptions::default(),
            self.stop.clone(),
        )));
    }

    async fn restart(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        // The port may take a moment to be free again.
        for _ in 0..100 {
            if let Ok(listener) = tokio::net::TcpListener::bind(self.address).await {
                self.serve(listener);
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{} could not be bound again", self.address);
    }
}

#[derive(Default)]
struct Tally {
    /// Calls begun; `calls` counts those that settled (or hung past their bound).
    issued: u64,
    calls: u64,
    ok: u64,
    wrong: u64,
    hung: u64,
    errors: BTreeMap<&'static str, u64>,
}

fn kind(error: &CallError) -> &'static str {
    match error {
        CallError::NotReady { .. } => "not-ready",
        CallError::ConnectionLost { .. } => "connection-lost",
        CallError::Closing { .. } => "closing",
        CallError::Timeout { .. } => "timeout",
        CallError::Overloaded { .. } => "overloaded",
        CallError::UnknownServer(_) => "unknown-server",
        CallError::UnknownTool { .. } => "unknown-tool",
        CallError::Remote { .. } => "remote",
        CallError::Protocol { .. } => "protocol",
        CallError::Cancelled { .. } => "cancelled",
        CallError::ShuttingDown => "shutting-down",
        _ => "other",
    }
}

/// A small deterministic generator: the run is reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_loses_no_call_hangs_none_and_leaves_nothing_behind() {
    counters();
    let seconds = setting("CHAOS_SECONDS", 8);
    let stdio = setting("CHAOS_SERVERS", 4);
    let http_count = setting("CHAOS_HTTP", 2);
    let callers = setting("CHAOS_CALLERS", 16);
    let run = format!("chaos-{}", std::process::id());
    let deadline = Duration::from_secs(3);

    let mut http = Vec::new();
    for _ in 0..http_count {
        http.push(HttpServer::start().await);
    }
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let mut aliases = Vec::new();
    for i in 0..stdio {
        let alias = format!("s{i}");
        let upper = alias.to_ascii_uppercase();
        // Each server has a child of its own: chaos kills servers and children alike.
        let script = format!("sleep 600 & exec \"{EXE}\" fixture --name {alias}");
        env.insert(format!("PLURNK_MCP_{upper}"), "/bin/sh".into());
        env.insert(
            format!("PLURNK_MCP_{upper}_ARGS"),
            json!(["-c", script]).to_string(),
        );
        env.insert(
            format!("PLURNK_MCP_{upper}_ENV"),
            json!({ "TEST_MARK": format!("{run}-{alias}") }).to_string(),
        );
        aliases.push(alias);
    }
    for (i, server) in http.iter().enumerate() {
        let alias = format!("h{i}");
        env.insert(
            format!("PLURNK_MCP_{}", alias.to_ascii_uppercase()),
            format!("http://{}/mcp", server.address),
        );
        aliases.push(alias);
    }
    env.insert("PLURNK_MCP_ENABLED".into(), json!(aliases).to_string());
    env.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), "5000".into());
    // The suite's servers run under its harness policy: they are the repository's binary
    // started through a shell wrapper.
    let config = env::checked(env);
    let options = HostOptions::default()
        .with_restart(
            RestartPolicy::default()
                .with_min_delay(Duration::from_millis(20))
                .with_max_delay(Duration::from_millis(300))
                .with_crash_limit(100_000)
                .with_window(Duration::from_secs(60)),
        )
        .with_drain_timeout(Some(Duration::from_secs(2)));
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let ok_before = counter("plurnk_mcp_calls_total{outcome=ok}");

    // Callers: echo on a random server, each call bounded, its answer checked.
    let stop = CancellationToken::new();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut tasks = Vec::new();
    let mut togglers = Vec::new();
    for caller in 0..callers {
        let (workspace, stop, tally, aliases) = (
            workspace.clone(),
            stop.clone(),
            tally.clone(),
            aliases.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (caller + 1));
            let mut n = 0u64;
            while !stop.is_cancelled() {
                n += 1;
                let alias = &aliases[rng.below(aliases.len() as u64) as usize];
                let text = format!("{caller}-{n}");
                let options = CallOptions::default().with_timeout(Some(deadline));
                if let Ok(mut tally) = tally.lock() {
                    tally.issued += 1;
                }
                let call = workspace.call_tool(alias, "echo", json!({ "text": text }), options);
                let outcome = tokio::time::timeout(deadline + Duration::from_secs(5), call).await;
                let failed = !matches!(outcome, Ok(Ok(_)));
                {
                    let Ok(mut tally) = tally.lock() else { return };
                    tally.calls += 1;
                    match outcome {
                        Err(_) => tally.hung += 1,
                        Ok(Ok(result)) if result.text() == text => tally.ok += 1,
                        Ok(Ok(_)) => tally.wrong += 1,
                        Ok(Err(error)) => *tally.errors.entry(kind(&error)).or_default() += 1,
                    }
                }
                // A refused call returns at once: back off a little rather than spin on the
                // two workers the host runs on.
                if failed {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                } else if n.is_multiple_of(8) {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }

    // Chaos: kill a server or its child, toggle a server, restart an HTTP server.
    let (mut kills_server, mut kills_child, mut toggles, mut restarts) = (0u64, 0u64, 0u64, 0u64);
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(seconds) {
        // The pause is the scenario: the chaos's pace, a blow every 50 to 200 ms.
        tokio::time::sleep(Duration::from_millis(50 + rng.below(150))).await;
        match rng.below(4) {
            0 | 1 if stdio > 0 => {
                let alias = format!("s{}", rng.below(stdio));
                let processes = marked(&format!("{run}-{alias}"));
                if let Some((pid, _)) = processes.get(rng.below(processes.len() as u64) as usize) {
                    let is_server = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|cmdline| cmdline.contains("fixture"));
                    // SAFETY: a signal to a process this test's servers started.
                    unsafe {
                        libc::kill(*pid, libc::SIGKILL);
                    }
                    if is_server {
                        kills_server += 1;
                    } else {
                        kills_child += 1;
                    }
                }
            }
            2 => {
                let alias = aliases[rng.below(aliases.len() as u64) as usize].clone();
                let workspace = workspace.clone();
                toggles += 1;
                // Disable, then enable again, beside the calls.
                togglers.push(tokio::spawn(async move {
                    let _ = workspace.disable(&alias).await;
                    let _ = workspace.enable(&alias).await;
                }));
            }
            _ if http_count > 0 => {
                let i = rng.below(http_count) as usize;
                http[i].restart().await;
                restarts += 1;
            }
            _ => {}
        }
    }
    stop.cancel();
    for task in tasks {
        task.await.expect("no caller panicked");
    }
    // The last toggles finish first: one still under way could disable a server after the
    // check below found it ready.
    for toggler in togglers {
        toggler.await.expect("no toggle panicked");
    }
    // Afterwards every server is ready again, by itself.
    for alias in &aliases {
        let _ = workspace.enable(alias).await;
    }
    let settled = workspace
        .wait_for(Duration::from_secs(60), |snapshot| {
            aliases.iter().all(|alias| {
                snapshot
                    .server(alias)
                    .is_some_and(|s| s.state == ServerState::Ready)
            })
        })
        .await;
    let recovered = aliases
        .iter()
        .filter(|alias| {
            settled
                .server(alias)
                .is_some_and(|s| s.state == ServerState::Ready)
        })
        .count();
    let ok_metric = counter("plurnk_mcp_calls_total{outcome=ok}") - ok_before;
    // Every server answers again.
    for alias in &aliases {
        let echo = workspace
            .call_tool(
                alias,
                "echo",
                json!({"text": "after"}),
                CallOptions::default(),
            )
            .await;
        assert_eq!(
            echo.as_ref().map(|r| r.text()).ok().as_deref(),
            Some("after"),
            "{alias}: {echo:?}"
        );
    }
    let report = host.shutdown().await;
    wait::until(wait::BOUND, || marked(&run).is_empty()).await;
    let orphans = marked(&run).len();

    let tally = tally.lock().expect("tally");
    let typed: u64 = tally.errors.values().sum();
    let figures = json!({
        "seconds": seconds,
        "stdio_servers": stdio,
        "http_servers": http_count,
        "callers": callers,
        "calls": tally.calls,
        "results": tally.ok,
        "typed_errors": typed,
        "errors_by_kind": tally.errors,
        "wrong_results": tally.wrong,
        "hung": tally.hung,
        "lost": tally.issued - tally.calls,
        "kills_server": kills_server,
        "kills_child": kills_child,
        "toggles": toggles,
        "http_restarts": restarts,
        "recovered": format!("{recovered}/{}", aliases.len()),
        "orphans": orphans,
        "ok_metric": ok_metric,
        "close_failures": report.failures.len(),
    });
    println!(
        "chaos: {}",
        serde_json::to_string_pretty(&figures).unwrap_or_default()
    );
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("chaos.json");
    let _ = std::fs::write(
        &path,
        serde_json::to_string_pretty(&figures).unwrap_or_default(),
    );

    assert!(
        tally.calls > 0 && tally.ok > 0,
        "the callers ran: {figures}"
    );
    assert_eq!(tally.hung, 0, "a call outlived its deadline: {figures}");
    assert_eq!(tally.issued, tally.calls, "a call never settled: {figures}");
    assert_eq!(
        tally.wrong, 0,
        "a call got another call's answer: {figures}"
    );
    assert_eq!(
        recovered,
        aliases.len(),
        "not every server came back: {figures}"
    );
    assert_eq!(
        orphans,
        0,
        "processes outlived the host: {:?}",
        marked(&run)
    );
    assert!(
        kills_server + kills_child + toggles + restarts > 0,
        "no chaos happened: {figures}"
    );
    // Every result a caller got went through an attachment and was counted there.
    assert_eq!(
        ok_metric, tally.ok,
        "the metrics disagree with the callers: {figures}"
    );
}
