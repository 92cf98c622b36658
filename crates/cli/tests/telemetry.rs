//! OpenTelemetry end to end, against a real OTLP/HTTP receiver (`support/otlp.rs`): one
//! trace from the Python SDK's client through `plurnk-mcp serve` and its host into a Python SDK
//! server, each end instrumented by OpenTelemetry's own Python packages; a daemon's own
//! `tracing` span as the parent of the host's; calls going on with the collector stopped,
//! every span that could not reach it counted.

#[path = "support/env.rs"]
mod env;
#[path = "support/otlp.rs"]
mod otlp;
#[path = "support/peers.rs"]
mod peers;
#[path = "support/wait.rs"]
mod wait;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use plurnk_mcp::telemetry::Telemetry;
use plurnk_mcp::telemetry::tracing_opentelemetry::OpenTelemetrySpanExt;
use plurnk_mcp::{CallOptions, Host};
use serde_json::json;
use tracing::Instrument;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

use self::env::EXE;
use self::otlp::{ReceivedSpan, Receiver};
use self::wait::BOUND;

/// The traced peers: the otel venv's Python and `peers/otel_peer.py`.
fn otel_peer() -> (String, String) {
    peers::peers();
    let env = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../.cache/peers.env"
    ))
    .expect("install-peers.sh writes .cache/peers.env");
    let value = |key: &str| {
        env.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .map(|v| v.trim_matches(['\'', '"']).to_owned())
            .unwrap_or_else(|| panic!("{key} missing from peers.env"))
    };
    (value("OTEL_PYTHON"), value("OTEL_PEER"))
}

/// `plurnk-mcp serve` over HTTP with exactly `vars` (plus PATH and HOME), stopped with
/// SIGTERM (the way an operator stops it) when dropped.
struct Served {
    child: Child,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    fn start(vars: &[(String, String)]) -> Self {
        let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "telemetry-{}-{}.sqlite",
            std::process::id(),
            rand_suffix()
        ));
        let _ = std::fs::remove_file(&state);
        let mut command = Command::new(EXE);
        command
            .arg("--state")
            .arg(&state)
            .args(["serve", "--transport", "http", "--listen", "127.0.0.1:0"])
            .env_clear()
            .envs(vars.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for key in ["PATH", "HOME"] {
            if let Ok(value) = std::env::var(key) {
                command.env(key, value);
            }
        }
        let mut child = command.spawn().expect("plurnk-mcp serve starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (found, url) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().expect("stderr"));
        let kept = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                    let _ = found.send(url.to_owned());
                }
                kept.lock().expect("stderr").push_str(&format!("{line}\n"));
            }
        });
        let url = url
            .recv_timeout(Duration::from_secs(90))
            .unwrap_or_else(|_| panic!("serve printed no URL: {}", stderr.lock().expect("stderr")));
        Self { child, url, stderr }
    }

    /// SIGTERM, then its exit (bounded): what it does on the way out is done.
    fn stop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let child = &mut self.child;
        if !wait::until_blocking(BOUND, || matches!(child.try_wait(), Ok(Some(_)))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr").clone()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

/// The one span of `spans` that `matches`, or a failure listing them all.
fn one<'a>(
    spans: &'a [ReceivedSpan],
    what: &str,
    matches: impl Fn(&ReceivedSpan) -> bool,
) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|span| matches(span)).collect();
    assert_eq!(
        found.len(),
        1,
        "{what}: expected one span, found {found:#?}\nall: {spans:#?}"
    );
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_runs_from_a_python_client_through_the_gateway_and_the_host_into_a_python_server()
{
    let (python, peer) = otel_peer();
    let receiver = Receiver::start().await;
    let vars = vec![
        ("PLURNK_MCP_PY".to_owned(), python.clone()),
        ("PLURNK_MCP_ENABLED".to_owned(), json!(["py"]).to_string()),
        (
            "PLURNK_MCP_PY_ARGS".to_owned(),
            json!([peer, "server", "--otlp", receiver.url()]).to_string(),
        ),
        // A Python server takes seconds to start on a busy machine.
        ("PLURNK_MCP_CONNECT_TIMEOUT".to_owned(), "60000".to_owned()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), receiver.url()),
        ("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "100".to_owned()),
        // Only the shutdown's flush can deliver the histograms within the test.
        (
            "OTEL_METRIC_EXPORT_INTERVAL".to_owned(),
            "3600000".to_owned(),
        ),
    ];
    let mut served = Served::start(&vars);
    let client = tokio::process::Command::new(&python)
        .args([
            &peer,
            "client",
            "--otlp",
            &receiver.url(),
            "--http",
            &served.url,
        ])
        .args(["--tool", "py_echo", "--text", "traced through"])
        .stdin(Stdio::null())
        .output();
    let output = tokio::time::timeout(Duration::from_secs(90), client)
        .await
        .expect("the Python client ends")
        .expect("the Python client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client: {stdout}\n{}\nserve: {}",
        String::from_utf8_lossy(&output.stderr),
        served.stderr()
    );
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("traced through"));
    let trace_id = lines.next().expect("the client's trace id").to_owned();
    assert_eq!(trace_id.len(), 32, "{stdout}");

    // Four spans, one trace: the client's, the gateway's, the host's, the server's.
    let complete = wait::until(BOUND, || receiver.trace(&trace_id).len() >= 4).await;
    let spans = receiver.trace(&trace_id);
    assert!(
        complete,
        "the trace is not whole: {spans:#?}\nserve: {}",
        served.stderr()
    );
    let client = one(&spans, "the Python client's span", |span| {
        span.service == "python-otel-client" && span.attribute("mcp.method.name") == "tools/call"
    });
    let gateway = one(&spans, "the gateway's server span", |span| {
        span.service == "plurnk-mcp" && span.kind == "SERVER"
    });
    let host = one(&spans, "the host's client span", |span| {
        span.service == "plurnk-mcp" && span.kind == "CLIENT"
    });
    let server = one(&spans, "the Python server's span", |span| {
        span.service == "python-otel-server" && span.attribute("mcp.method.name") == "tools/call"
    });
    assert_eq!(client.kind, "CLIENT");
    assert_eq!(
        gateway.parent_span_id, client.span_id,
        "gateway under client"
    );
    assert_eq!(host.parent_span_id, gateway.span_id, "host under gateway");
    assert_eq!(server.parent_span_id, host.span_id, "server under host");
    assert_eq!(server.kind, "SERVER");
    assert_eq!(server.name, "tools/call echo");

    // The conventions' names and attributes on the gateway's and the host's spans.
    assert_eq!(gateway.name, "tools/call py_echo");
    assert_eq!(host.name, "tools/call echo");
    for (span, tool, transport) in [(gateway, "py_echo", "tcp"), (host, "echo", "pipe")] {
        assert_eq!(span.attribute("mcp.method.name"), "tools/call", "{span:#?}");
        assert_eq!(span.attribute("gen_ai.tool.name"), tool, "{span:#?}");
        assert_eq!(
            span.attribute("gen_ai.operation.name"),
            "execute_tool",
            "{span:#?}"
        );
        assert_eq!(span.attribute("network.transport"), transport, "{span:#?}");
        assert!(
            !span.attribute("jsonrpc.request.id").is_empty(),
            "{span:#?}"
        );
        assert!(
            !span.attribute("mcp.protocol.version").is_empty(),
            "{span:#?}"
        );
        assert_eq!(span.status, "UNSET", "{span:#?}");
        assert!(!span.attributes.contains_key("error.type"), "{span:#?}");
    }
    assert_eq!(gateway.attribute("network.protocol.name"), "http");
    assert_eq!(host.attribute("plurnk.mcp.server"), "py");
    // The request the server saw is the one the host's span names.
    assert_eq!(
        server.attribute("jsonrpc.request.id"),
        host.attribute("jsonrpc.request.id")
    );
    // Each span lies within its parent's time.
    for (parent, child) in [(client, gateway), (gateway, host), (host, server)] {
        assert!(
            parent.start_unix_nano <= child.start_unix_nano
                && child.end_unix_nano <= parent.end_unix_nano + 1_000_000,
            "{child:#?} outside {parent:#?}"
        );
    }
    write_trace(&spans, &receiver.spans());

    // A hydration, with its connection attempt as a child.
    let all = receiver.spans();
    let hydration = one(&all, "the hydration", |span| span.name == "hydrate");
    let attempt = one(&all, "the connection attempt", |span| {
        span.name == "connect py"
    });
    assert_eq!(attempt.parent_span_id, hydration.span_id);
    assert_eq!(attempt.trace_id, hydration.trace_id);
    // The attempt's listings carry its context: the server's spans of them are its children.
    let listed = one(&all, "the server's tools/list", |span| {
        span.service == "python-otel-server" && span.name == "tools/list"
    });
    assert_eq!(listed.parent_span_id, attempt.span_id);

    // The histograms go out at shutdown: the exit flushes them.
    served.stop();
    assert!(
        wait::until(BOUND, || {
            let names = receiver.metric_names("plurnk-mcp");
            names
                .iter()
                .any(|name| name == "mcp.client.operation.duration")
                && names
                    .iter()
                    .any(|name| name == "mcp.server.operation.duration")
        })
        .await,
        "metrics: {:?}\nserve: {}",
        receiver.metric_names("plurnk-mcp"),
        served.stderr()
    );
    assert_eq!(receiver.malformed(), 0);
}

/// Writes the trace the test found (and the hydration beside it) for the README's picture
/// (`bench/trace.py`): `target/telemetry/trace.json`.
fn write_trace(trace: &[ReceivedSpan], all: &[ReceivedSpan]) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../telemetry");
    let _ = std::fs::create_dir_all(&dir);
    let hydration: Vec<&ReceivedSpan> = all
        .iter()
        .filter(|span| span.name == "hydrate" || span.name.starts_with("connect "))
        .collect();
    let body = json!({"call": trace, "hydration": hydration});
    let _ = std::fs::write(
        dir.join("trace.json"),
        serde_json::to_vec_pretty(&body).unwrap_or_default(),
    );
}

/// The telemetry of an embedding daemon: `OTEL_*` read from a map, exporting to `receiver`.
fn telemetry(receiver: &Receiver, extra: &[(&str, &str)]) -> Telemetry {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    vars.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), receiver.url());
    vars.insert("OTEL_METRICS_EXPORTER".into(), "none".into());
    vars.insert("OTEL_SERVICE_NAME".into(), "daemon".into());
    vars.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "20".into());
    for (key, value) in extra {
        vars.insert((*key).into(), (*value).into());
    }
    Telemetry::from_env(vars)
        .expect("valid variables")
        .expect("export on")
}

#[tokio::test]
async fn a_daemons_own_tracing_span_is_the_parent_of_the_hosts_span_for_a_call() {
    let receiver = Receiver::start().await;
    let telemetry = telemetry(&receiver, &[]);
    // The daemon's subscriber: its own spans and the host's, all exported (a current-thread
    // runtime, so every task of the host sees this thread's subscriber).
    let subscriber = tracing_subscriber::registry().with(telemetry.layer());
    let _default = tracing::subscriber::set_default(subscriber);
    let host = Host::start(env::Env::new().stdio("fx", &[]).enable(&["fx"]).config())
        .await
        .expect("the host starts");
    let workspace = host.default_workspace();

    let request = tracing::info_span!("daemon.request", otel.name = "daemon handles a request");
    let answered = workspace
        .call_tool(
            "fx",
            "echo",
            json!({"text": "from the daemon"}),
            CallOptions::default(),
        )
        .instrument(request.clone())
        .await
        .expect("the call succeeds");
    assert_eq!(answered.text(), "from the daemon");

    // An explicit parent wins over the current span.
    let explicit = tracing::info_span!("daemon.job", otel.name = "daemon job");
    let parent = explicit.context();
    let unrelated = tracing::info_span!("daemon.elsewhere", otel.name = "unrelated");
    workspace
        .call_tool(
            "fx",
            "echo",
            json!({"text": "explicit"}),
            CallOptions::default().with_parent(Some(parent)),
        )
        .instrument(unrelated.clone())
        .await
        .expect("the call succeeds");
    drop((request, explicit, unrelated));
    let _ = host.shutdown().await;
    // The flush blocks; the receiver runs on this runtime's one thread meanwhile.
    let flushed = tokio::task::spawn_blocking(move || telemetry.shutdown(Duration::from_secs(10)))
        .await
        .expect("the flush ends");
    assert!(flushed.in_time);
    assert_eq!(flushed.spans_dropped, 0);

    let spans = receiver.spans();
    let daemon = one(&spans, "the daemon's span", |span| {
        span.name == "daemon handles a request"
    });
    let job = one(&spans, "the daemon's job", |span| span.name == "daemon job");
    let calls: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|span| span.name == "tools/call echo" && span.kind == "CLIENT")
        .collect();
    assert_eq!(calls.len(), 2, "{spans:#?}");
    let under_request = calls
        .iter()
        .find(|span| span.parent_span_id == daemon.span_id)
        .unwrap_or_else(|| panic!("no call under the daemon's span: {spans:#?}"));
    assert_eq!(under_request.trace_id, daemon.trace_id);
    assert_eq!(under_request.service, "daemon");
    assert_eq!(under_request.attribute("plurnk.mcp.server"), "fx");
    assert!(
        calls
            .iter()
            .any(|span| span.parent_span_id == job.span_id && span.trace_id == job.trace_id),
        "the explicit parent was not the call's: {spans:#?}"
    );
}

#[tokio::test]
async fn calls_run_on_with_the_collector_stopped_and_every_dropped_span_is_counted() {
    let mut receiver = Receiver::start().await;
    let address = receiver.address();
    let telemetry = telemetry(
        &receiver,
        &[
            ("OTEL_BSP_MAX_QUEUE_SIZE", "16"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "500"),
        ],
    );
    // The host's spans only, as the command line exports them: each is counted below.
    let subscriber = tracing_subscriber::registry().with(
        telemetry.layer().with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target(plurnk_mcp::telemetry::TARGET, tracing::Level::TRACE),
        ),
    );
    let _default = tracing::subscriber::set_default(subscriber);
    let host = Host::start(env::Env::new().stdio("fx", &[]).enable(&["fx"]).config())
        .await
        .expect("the host starts");
    let workspace = host.default_workspace();
    let call = |text: String| {
        let workspace = workspace.clone();
        async move {
            workspace
                .call_tool(
                    "fx",
                    "echo",
                    json!({ "text": text }),
                    CallOptions::default(),
                )
                .await
        }
    };
    for n in 0..5 {
        call(format!("before {n}")).await.expect("a call");
    }
    assert!(
        wait::until(BOUND, || {
            receiver
                .spans()
                .iter()
                .filter(|span| span.kind == "CLIENT")
                .count()
                == 5
        })
        .await,
        "the live collector got every call's span"
    );

    receiver.stop().await;
    // Far more calls than the queue holds, with nothing to take them: every call is answered,
    // and the spans that cannot wait are dropped and counted.
    for n in 0..400 {
        let answered = call(format!("while down {n}"))
            .await
            .expect("a call while the collector is down");
        assert_eq!(answered.text(), format!("while down {n}"));
    }
    assert!(
        wait::until(BOUND, || telemetry.spans_dropped() > 0).await,
        "no span was counted as dropped"
    );
    let dropped = telemetry.spans_dropped();
    assert!(dropped <= 400, "{dropped} dropped of 400");

    // The collector comes back on its port: export resumes.
    let back = Receiver::start_on(address).await;
    call("after".into()).await.expect("a call");
    assert!(
        wait::until(BOUND, || back
            .spans()
            .iter()
            .any(|span| span.kind == "CLIENT"))
        .await,
        "export did not resume"
    );
    let _ = host.shutdown().await;
    let flushed = tokio::task::spawn_blocking(move || telemetry.shutdown(Duration::from_secs(10)))
        .await
        .expect("the flush ends");
    assert!(flushed.in_time);
    // Every span the host ended either reached a collector or was counted: the hydration,
    // its connection attempt and 406 calls.
    let received = receiver.spans().len() + back.spans().len();
    assert_eq!(
        received as u64 + flushed.spans_dropped,
        408,
        "{received} received, {} dropped",
        flushed.spans_dropped
    );
}
