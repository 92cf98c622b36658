//! The gateway (`plurnk-mcp serve`, `plurnk_mcp::gateway`): a workspace's merged namespace
//! served as one MCP server, used by plurnk-mcp's own host, by the official TypeScript v2
//! client and by the Python SDK client (both revisions), over stdio and Streamable HTTP;
//! upstream servers going away and coming back while clients watch.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plurnk_mcp::gateway::{Gateway, HttpOptions, Naming};
use plurnk_mcp::{CallError, CallOptions, Host, HostConfig, ServerState, WorkspaceSnapshot};
use serde_json::{Value, json};

#[path = "support/peers.rs"]
mod support;
use support::{peer_script, peers};

#[path = "support/calls.rs"]
mod calls;
use calls::{BOUND, shutdown_clean};

const EXE: &str = env!("CARGO_BIN_EXE_plurnk-mcp");

/// A credential an upstream is given, and must never reach a gateway client.
const SECRET: &str = "gateway-upstream-secret-5f2e81";

fn config(pairs: &[(&str, String)]) -> HostConfig {
    let mut map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), value.clone()))
        .collect();
    map.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), "30000".into());
    match HostConfig::from_env(map) {
        Ok(config) => config,
        Err(errors) => panic!("test configuration is invalid: {errors}"),
    }
}

/// The environment of fixture server `alias` (stdio).
fn fixture(alias: &str, extra: &[&str]) -> Vec<(String, String)> {
    let upper = alias.to_ascii_uppercase().replace('-', "_");
    let mut args = vec!["fixture", "--name", alias];
    args.extend_from_slice(extra);
    vec![
        (format!("PLURNK_MCP_{upper}"), EXE.to_owned()),
        (format!("PLURNK_MCP_{upper}_ARGS"), json!(args).to_string()),
    ]
}

fn pairs(list: &[(String, String)]) -> Vec<(&str, String)> {
    list.iter()
        .map(|(key, value)| (key.as_str(), value.clone()))
        .collect()
}

/// The served tool names of `alias` in a snapshot of a host attached to a gateway.
fn tool_names(snapshot: &WorkspaceSnapshot, alias: &str) -> Vec<String> {
    snapshot
        .server(alias)
        .filter(|server| server.state == ServerState::Ready)
        .map(|server| server.tools.iter().map(|tool| tool.name.clone()).collect())
        .unwrap_or_default()
}

/// An in-process host on two fixture servers, its default workspace served over HTTP on
/// loopback, and a second host attached to that gateway as server `gw`.
struct Pair {
    inner: Host,
    outer: Host,
    shutdown: tokio_util::sync::CancellationToken,
    url: String,
}

impl Pair {
    async fn start() -> Self {
        let mut env = fixture("alpha", &[]);
        env.extend(fixture("beta", &[]));
        env.push((
            "PLURNK_MCP_ENABLED".into(),
            json!(["alpha", "beta"]).to_string(),
        ));
        // Alpha holds a credential it will reveal when asked: the gateway's clients see it
        // scrubbed, as the host's own callers do.
        env.push((
            "PLURNK_MCP_ALPHA_ENV".into(),
            json!({"API_KEY": "${GATEWAY_SECRET}"}).to_string(),
        ));
        env.push(("GATEWAY_SECRET".into(), SECRET.into()));
        let inner = Host::start(config(&pairs(&env))).await.expect("inner host");
        let workspace = inner.default_workspace();
        let ready = workspace
            .wait_for(BOUND, |snapshot| {
                ["alpha", "beta"].iter().all(|alias| {
                    snapshot
                        .server(alias)
                        .is_some_and(|server| server.state == ServerState::Ready)
                })
            })
            .await;
        assert!(ready.is_settled(), "the upstream servers connect");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let gateway = Gateway::new(workspace, Naming::Prefixed);
        tokio::spawn(plurnk_mcp::gateway::serve_http(
            gateway,
            listener,
            HttpOptions::default(),
            shutdown.clone(),
        ));
        let outer = Host::start(config(&[
            ("PLURNK_MCP_GW", url.clone()),
            ("PLURNK_MCP_ENABLED", json!(["gw"]).to_string()),
        ]))
        .await
        .expect("outer host");
        Self {
            inner,
            outer,
            shutdown,
            url,
        }
    }

    async fn stop(self) {
        shutdown_clean(self.outer).await;
        self.shutdown.cancel();
        shutdown_clean(self.inner).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plurnk_mcp_attaches_to_a_gateway_and_reaches_every_upstream_through_it() {
    let pair = Pair::start().await;
    let outer = pair.outer.default_workspace();
    let snapshot = outer
        .wait_for(BOUND, |snapshot| tool_names(snapshot, "gw").len() >= 24)
        .await;
    let gw = snapshot.server("gw").expect("gw is configured");
    assert_eq!(gw.state, ServerState::Ready, "{:?}", gw.problem);
    let negotiated = gw.negotiated.as_ref().expect("negotiated");
    assert_eq!(negotiated.revision, "2026-07-28");
    assert!(negotiated.modern, "the gateway answers server/discover");
    assert_eq!(negotiated.name.as_deref(), Some("plurnk-mcp"));
    let names = tool_names(&snapshot, "gw");
    for expected in ["alpha_echo", "alpha_sleep", "beta_echo", "beta_add"] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} in {names:?}"
        );
    }
    assert!(
        names
            .iter()
            .all(|name| name.starts_with("alpha_") || name.starts_with("beta_")),
        "every served name is <server>_<tool>: {names:?}"
    );
    // Descriptions and schemas pass through unchanged.
    let echo = gw
        .tools
        .iter()
        .find(|tool| tool.name == "alpha_echo")
        .expect("alpha_echo");
    assert_eq!(
        echo.description.as_deref(),
        Some("Return the given text unchanged.")
    );
    assert_eq!(echo.input_schema["required"], json!(["text"]));

    let answer = outer
        .call_tool(
            "gw",
            "alpha_echo",
            json!({"text": "through"}),
            CallOptions::default(),
        )
        .await
        .expect("alpha_echo");
    assert_eq!(answer.text(), "through");
    let sum = outer
        .call_tool(
            "gw",
            "beta_add",
            json!({"a": 2, "b": 3}),
            CallOptions::default(),
        )
        .await
        .expect("beta_add");
    assert_eq!(sum.text(), "5");
    // A tool error is a result, flagged, not a failure.
    let failed = outer
        .call_tool(
            "gw",
            "beta_fail",
            json!({"message": "no"}),
            CallOptions::default(),
        )
        .await
        .expect("beta_fail settles");
    assert!(failed.is_error);
    assert_eq!(failed.text(), "no");

    // Progress crosses both hops, in order, before the result.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let options = CallOptions {
        progress: Some(Arc::new(move |progress: plurnk_mcp::Progress| {
            sink_seen.lock().expect("progress").push(progress.progress);
        })),
        ..CallOptions::default()
    };
    let counted = outer
        .call_tool(
            "gw",
            "alpha_count",
            json!({"steps": 3, "delay_ms": 20}),
            options,
        )
        .await
        .expect("alpha_count");
    assert_eq!(counted.text(), "counted 3");
    assert_eq!(*seen.lock().expect("progress"), vec![1.0, 2.0, 3.0]);

    // Resources keep their URIs, each listed with the server it belongs to. Alpha and beta
    // both list this one: a read that does not say which is refused, naming both, rather
    // than handed to whichever sorts first (a server could claim another's URI that way).
    let counters: Vec<&Value> = gw
        .catalog
        .resources
        .iter()
        .filter(|resource| resource.uri == "fixture://counter")
        .map(|resource| &resource.definition["_meta"]["plurnk/server"])
        .collect();
    assert_eq!(counters, [&json!("alpha"), &json!("beta")]);
    match outer
        .read_resource("gw", "fixture://counter", CallOptions::default())
        .await
    {
        Err(CallError::Remote { message, .. }) => assert!(
            message.contains("claimed by servers \"alpha\" and \"beta\"")
                && message.contains("plurnk/server"),
            "{message}"
        ),
        other => panic!("an ambiguous read is refused: {other:?}"),
    }
    // A client that names the server reads from that one, and the answer says who answered.
    let read = post_json(
        &pair.url,
        json!({"jsonrpc": "2.0", "id": 9, "method": "resources/read",
               "params": {"uri": "fixture://counter",
                          "_meta": {"plurnk/server": "beta",
                                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                    "io.modelcontextprotocol/clientCapabilities": {}}}}),
    );
    let result = &read["result"];
    assert!(
        result["contents"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("reads: ")),
        "{read}"
    );
    assert_eq!(result["_meta"]["plurnk/server"], "beta", "{read}");

    // A credential an upstream reflects reaches no client of the gateway.
    let revealed = outer
        .call_tool(
            "gw",
            "alpha_reveal",
            json!({"name": "API_KEY", "to": "text"}),
            CallOptions::default(),
        )
        .await
        .expect("alpha_reveal");
    assert_eq!(revealed.text(), "API_KEY=<redacted>");
    let raw = post_json(
        &pair.url,
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
               "params": {"name": "alpha_reveal", "arguments": {"name": "API_KEY", "to": "error"},
                          "_meta": modern_meta()}}),
    );
    assert!(!raw.to_string().contains(SECRET), "{raw}");
    assert!(raw.to_string().contains("<redacted>"), "{raw}");

    // A name that routes nowhere is the client's error, and says how names are made.
    match outer
        .call_tool(
            "gw",
            "gamma_echo",
            json!({"text": "x"}),
            CallOptions::default(),
        )
        .await
    {
        Err(CallError::UnknownTool { .. }) => {}
        other => panic!("a tool the gateway does not list is refused by the host: {other:?}"),
    }
    let raw = post_json(
        &pair.url,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "gamma_echo", "arguments": {}, "_meta": modern_meta()}}),
    );
    assert_eq!(raw["error"]["code"], -32602, "{raw}");
    let message = raw["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("gamma_echo") && message.contains("<server>_<name>"),
        "{message}"
    );
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_dies_mid_call_fails_the_call_and_its_tools_leave_and_come_back() {
    let pair = Pair::start().await;
    let outer = pair.outer.default_workspace();
    outer
        .wait_for(BOUND, |snapshot| tool_names(snapshot, "gw").len() >= 24)
        .await;

    // A disabled upstream leaves tools/list, and the client hears of it.
    let inner = pair.inner.default_workspace();
    inner.disable("beta").await.expect("disable beta");
    let gone = outer
        .wait_for(BOUND, |snapshot| {
            !tool_names(snapshot, "gw")
                .iter()
                .any(|name| name.starts_with("beta_"))
        })
        .await;
    let names = tool_names(&gone, "gw");
    assert!(
        !names.is_empty() && names.iter().all(|name| name.starts_with("alpha_")),
        "{names:?}"
    );
    inner.enable("beta").await.expect("enable beta");
    let back = outer
        .wait_for(BOUND, |snapshot| {
            tool_names(snapshot, "gw").contains(&"beta_echo".to_owned())
        })
        .await;
    assert!(tool_names(&back, "gw").contains(&"beta_echo".to_owned()));

    // Killed under a call: the client gets a JSON-RPC error at once, not a hang.
    let pid = outer
        .call_tool("gw", "alpha_pid", json!({}), CallOptions::default())
        .await
        .expect("alpha_pid")
        .text();
    let pid: i32 = pid.parse().expect("a pid");
    let started = Instant::now();
    let call = tokio::spawn({
        let outer = outer.clone();
        async move {
            outer
                .call_tool(
                    "gw",
                    "alpha_sleep",
                    json!({"ms": 60_000}),
                    CallOptions::default(),
                )
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // SAFETY: kill(2) with a pid read from the server itself; no memory is involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "kill {pid}");
    let settled = tokio::time::timeout(BOUND, call)
        .await
        .expect("the call settles long before its deadline")
        .expect("the call task");
    match settled {
        Err(CallError::Remote { code, message, .. }) => {
            assert_eq!(code, -32603, "{message}");
            assert!(
                message.contains("alpha") && message.contains("connection"),
                "{message}"
            );
        }
        other => panic!("a JSON-RPC error reaches the client: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    // The server comes back by itself, and its tools with it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = outer
            .call_tool(
                "gw",
                "alpha_echo",
                json!({"text": "again"}),
                CallOptions::default(),
            )
            .await;
        if let Ok(answer) = answer {
            assert_eq!(answer.text(), "again");
            break;
        }
        assert!(Instant::now() < deadline, "alpha came back: {answer:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plurnk_mcp_attaches_to_a_gateway_it_starts_over_stdio() {
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gateway-attach-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&state);
    let upstream = json!({
        "PLURNK_MCP_FX": EXE,
        "PLURNK_MCP_FX_ARGS": json!(["fixture", "--name", "fx"]).to_string(),
        "PLURNK_MCP_ENABLED": json!(["fx"]).to_string(),
    });
    let outer = Host::start(config(&[
        ("PLURNK_MCP_GW", EXE.to_owned()),
        (
            "PLURNK_MCP_GW_ARGS",
            json!(["--state", state, "serve"]).to_string(),
        ),
        ("PLURNK_MCP_GW_ENV", upstream.to_string()),
        ("PLURNK_MCP_ENABLED", json!(["gw"]).to_string()),
    ]))
    .await
    .expect("outer host");
    let workspace = outer.default_workspace();
    let snapshot = workspace
        .wait_for(BOUND, |snapshot| !tool_names(snapshot, "gw").is_empty())
        .await;
    let gw = snapshot.server("gw").expect("gw");
    assert_eq!(gw.state, ServerState::Ready, "{:?}", gw.problem);
    assert_eq!(
        gw.negotiated.as_ref().map(|n| n.revision.as_str()),
        Some("2026-07-28")
    );
    let names = tool_names(&snapshot, "gw");
    assert!(names.contains(&"fx_echo".to_owned()), "{names:?}");
    let answer = workspace
        .call_tool(
            "gw",
            "fx_echo",
            json!({"text": "over stdio"}),
            CallOptions::default(),
        )
        .await
        .expect("fx_echo");
    assert_eq!(answer.text(), "over stdio");
    shutdown_clean(outer).await;
}

/// The `_meta` a 2026-07-28 request carries.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "gateway-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// POSTs one 2026-07-28 JSON-RPC request and returns the response message (from a JSON
/// body or the first SSE `data:` event that is one).
fn post_json(url: &str, message: Value) -> Value {
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    // Mcp-Name carries the tool or prompt name, or a resource's URI.
    let name = message["params"]["name"]
        .as_str()
        .or_else(|| message["params"]["uri"].as_str())
        .unwrap_or_default()
        .to_owned();
    let mut headers = vec![("Mcp-Method", method.as_str())];
    if !name.is_empty() {
        headers.push(("Mcp-Name", name.as_str()));
    }
    let response = raw_post(url, &message, &headers);
    let body = response.1;
    if let Ok(value) = serde_json::from_str::<Value>(&body) {
        return value;
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|value| value.get("id").is_some())
        .unwrap_or_else(|| panic!("no response in {body}"))
}

/// POSTs `message` with extra headers; (status, body).
fn raw_post(url: &str, message: &Value, headers: &[(&str, &str)]) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (authority, path) = rest.split_once('/').expect("a path");
    let body = message.to_string();
    let mut request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = std::net::TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    stream.write_all(request.as_bytes()).expect("write");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// `plurnk-mcp serve` as a child process.
struct Served {
    child: Child,
    url: Option<String>,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// Starts `plurnk-mcp --state <fresh> serve <args>` with exactly `vars` (plus PATH and
    /// HOME); for HTTP, waits for the URL it prints.
    fn start(args: &[&str], vars: &[(String, String)], http: bool) -> Self {
        let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "gateway-{}-{}.sqlite",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        let _ = std::fs::remove_file(&state);
        let mut command = Command::new(EXE);
        command
            .arg("--state")
            .arg(&state)
            .arg("serve")
            .args(args)
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
                if let Some(url) = line
                    .split_whitespace()
                    .find(|word| word.starts_with("http://"))
                {
                    let _ = found.send(url.to_owned());
                }
                kept.lock().expect("stderr").push_str(&format!("{line}\n"));
            }
        });
        let url = http.then(|| {
            url.recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    panic!("serve printed no URL: {}", stderr.lock().expect("stderr"))
                })
        });
        Self { child, url, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr").clone()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[test]
fn off_loopback_the_gateway_needs_a_bearer_token_and_checks_it_without_showing_it() {
    let mut env = fixture("solo", &[]);
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["solo"]).to_string()));
    // Off loopback without a token: refused before anything listens.
    let output = Command::new(EXE)
        .args(["--state"])
        .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway-refused.sqlite"))
        .args(["serve", "--transport", "http", "--listen", "0.0.0.0:0"])
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .expect("serve runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("not loopback") && said.contains("--bearer-env"),
        "{said}"
    );

    // With a token: a request without it is 401, with it answered; the token is never shown.
    let token = "gateway-sentinel-token-7a1c9e";
    let mut vars = env.clone();
    vars.push(("GATEWAY_TOKEN".into(), token.into()));
    let served = Served::start(
        &[
            "--transport",
            "http",
            "--listen",
            "127.0.0.1:0",
            "--bearer-env",
            "GATEWAY_TOKEN",
        ],
        &vars,
        true,
    );
    let url = served.url.clone().expect("url");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                      "params": {"_meta": modern_meta()}});
    let (status, body) = raw_post(&url, &list, &[("Mcp-Method", "tools/list")]);
    assert_eq!(status, 401, "{body}");
    assert!(!body.contains(token));
    let (status, _) = raw_post(
        &url,
        &list,
        &[
            ("Mcp-Method", "tools/list"),
            ("Authorization", "Bearer wrong-token-000000"),
        ],
    );
    assert_eq!(status, 401);
    let bearer = format!("Bearer {token}");
    let (status, body) = raw_post(
        &url,
        &list,
        &[
            ("Mcp-Method", "tools/list"),
            ("Authorization", bearer.as_str()),
        ],
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("solo_echo"), "{body}");
    // A page a browser was tricked into sending is refused (DNS rebinding).
    let (status, _) = raw_post(
        &url,
        &list,
        &[
            ("Mcp-Method", "tools/list"),
            ("Authorization", bearer.as_str()),
            ("Origin", "http://evil.example.com"),
        ],
    );
    assert_eq!(status, 403);
    assert!(!served.stderr().contains(token), "{}", served.stderr());
}

#[test]
fn unprefixed_serving_needs_exactly_one_enabled_server() {
    let mut env = fixture("one", &[]);
    env.extend(fixture("two", &[]));
    env.push((
        "PLURNK_MCP_ENABLED".into(),
        json!(["one", "two"]).to_string(),
    ));
    let output = Command::new(EXE)
        .args(["--state"])
        .arg(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gateway-unprefixed.sqlite"))
        .args(["serve", "--unprefixed"])
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .output()
        .expect("serve runs");
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("exactly one") && said.contains("one, two"),
        "{said}"
    );
}

/// The upstreams of the real-client runs: the fixture (`fx`) and the Python SDK's surfaces
/// peer (`py`: prompts, resources, and `add_tool`, which changes its tool list).
fn real_client_upstreams() -> Vec<(String, String)> {
    let peers = peers();
    let mut env = fixture("fx", &[]);
    env.push(("PLURNK_MCP_PY".into(), peers.python.clone()));
    env.push((
        "PLURNK_MCP_PY_ARGS".into(),
        json!([peer_script("python_surfaces.py")]).to_string(),
    ));
    env.push(("PLURNK_MCP_ENABLED".into(), json!(["fx", "py"]).to_string()));
    env.push(("PLURNK_MCP_CONNECT_TIMEOUT".into(), "30000".into()));
    env
}

/// What every client does through the gateway: list, call, read, get a prompt, and see a
/// tool appear when an upstream adds one.
fn real_client_plan(fresh: &str) -> Value {
    json!([
        {"op": "list_tools"},
        {"op": "call", "tool": "fx_echo", "arguments": {"text": "through the gateway"}},
        {"op": "call", "tool": "fx_add", "arguments": {"a": 20, "b": 22}},
        {"op": "call", "tool": "nobody_here", "arguments": {}},
        {"op": "list_resources"},
        {"op": "read", "uri": "memo://greeting"},
        {"op": "list_prompts"},
        {"op": "get_prompt", "name": "py_greet", "arguments": {"name": "Ada"}},
        {"op": "call", "tool": "py_add_tool", "arguments": {"name": fresh}},
        {"op": "wait_tools_changed", "timeout_ms": 20000}
    ])
}

/// Runs one client driver (`program` with `args`) to its end; its output lines by op.
fn drive(program: &str, args: &[String], env: &[(String, String)]) -> Vec<Value> {
    let output = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().cloned())
        .envs(
            ["PATH", "HOME"]
                .iter()
                .filter_map(|key| Some((*key, std::env::var(key).ok()?))),
        )
        .stdin(Stdio::null())
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client ran its plan: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("a JSON line: {line}")))
        .collect()
}

/// Checks what a client saw against what the gateway serves.
fn check_client_run(lines: &[Value], revision: &str, fresh: &str, label: &str) {
    let connected = &lines[0];
    assert_eq!(connected["op"], "connected", "{label}: {connected}");
    assert_eq!(
        connected["protocolVersion"], revision,
        "{label}: {connected}"
    );
    assert_eq!(
        connected["serverInfo"]["name"], "plurnk-mcp",
        "{label}: {connected}"
    );
    let step = |index: usize| &lines[index + 1];
    for index in [0, 1, 2, 4, 5, 6, 7, 8, 9] {
        assert_eq!(
            step(index)["ok"],
            true,
            "{label}: step {index}: {}",
            step(index)
        );
    }
    let names: Vec<&str> = step(0)["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    for expected in ["fx_echo", "fx_add", "py_add_tool", "py_greet"] {
        if expected != "py_greet" {
            assert!(
                names.contains(&expected),
                "{label}: {expected} in {names:?}"
            );
        }
    }
    let text = |index: usize| step(index)["result"]["content"][0]["text"].clone();
    assert_eq!(text(1), "through the gateway", "{label}");
    assert_eq!(text(2), "42", "{label}");
    // A tool that is not served is the client's JSON-RPC error, naming it.
    assert_eq!(step(3)["ok"], false, "{label}: {}", step(3));
    assert_eq!(step(3)["error"]["code"], -32602, "{label}: {}", step(3));
    assert!(
        step(3)["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nobody_here")),
        "{label}: {}",
        step(3)
    );
    let uris: Vec<&str> = step(4)["result"]["resources"]
        .as_array()
        .map(|resources| resources.iter().filter_map(|r| r["uri"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        uris.contains(&"memo://greeting") && uris.contains(&"fixture://counter"),
        "{label}: {uris:?}"
    );
    assert!(
        step(5)["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{label}: {}",
        step(5)
    );
    let prompts: Vec<&str> = step(6)["result"]["prompts"]
        .as_array()
        .map(|prompts| prompts.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(prompts.contains(&"py_greet"), "{label}: {prompts:?}");
    assert!(
        step(7)["result"]["messages"].to_string().contains("Ada"),
        "{label}: {}",
        step(7)
    );
    let changed: Vec<&str> = step(9)["result"]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let fresh = format!("py_{fresh}");
    assert!(
        changed.contains(&fresh.as_str()),
        "{label}: {fresh} in {changed:?}"
    );
}

/// The gateway a client drives: over HTTP a running `plurnk-mcp serve`, over stdio the
/// command line the client starts itself.
fn transports(env: &[(String, String)]) -> Vec<(&'static str, Option<Served>, Vec<String>)> {
    let served = Served::start(&["--transport", "http"], env, true);
    let url = served.url.clone().expect("url");
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gateway-stdio-{}.sqlite", std::process::id()));
    vec![
        ("http", Some(served), vec!["--http".into(), url]),
        (
            "stdio",
            None,
            vec![
                "--stdio".into(),
                EXE.into(),
                "--state".into(),
                state.to_string_lossy().into_owned(),
                "serve".into(),
            ],
        ),
    ]
}

#[test]
fn the_official_typescript_client_lists_calls_reads_and_gets_prompts_through_the_gateway() {
    let peers = peers();
    let env = real_client_upstreams();
    let script = peer_script("gateway_client.mjs");
    for (run, (transport, served, target)) in transports(&env).into_iter().enumerate() {
        let fresh = format!("ts_fresh_{run}");
        let mut args = vec![
            script.clone(),
            "--plan".into(),
            real_client_plan(&fresh).to_string(),
        ];
        args.extend(target);
        let lines = drive(&peers.node, &args, &env);
        check_client_run(
            &lines,
            "2026-07-28",
            &fresh,
            &format!("typescript over {transport}"),
        );
        drop(served);
    }
}

#[test]
fn the_python_sdk_client_uses_the_gateway_at_both_revisions() {
    let peers = peers();
    let env = real_client_upstreams();
    let script = peer_script("gateway_client.py");
    for revision in ["2026-07-28", "2025-11-25"] {
        for (run, (transport, served, target)) in transports(&env).into_iter().enumerate() {
            let fresh = format!("py_fresh_{}_{run}", revision.replace('-', "_"));
            let mut args = vec![
                script.clone(),
                "--revision".into(),
                revision.into(),
                "--plan".into(),
                real_client_plan(&fresh).to_string(),
            ];
            args.extend(target);
            let lines = drive(&peers.python, &args, &env);
            check_client_run(
                &lines,
                revision,
                &fresh,
                &format!("python {revision} over {transport}"),
            );
            drop(served);
        }
    }
}

#[test]
fn elicitation_crosses_the_gateway_to_the_client_at_both_revisions() {
    let peers = peers();
    let mut env = vec![
        ("PLURNK_MCP_PY".to_owned(), peers.python.clone()),
        (
            "PLURNK_MCP_PY_ARGS".to_owned(),
            json!([peer_script("python_surfaces.py")]).to_string(),
        ),
        ("PLURNK_MCP_ENABLED".to_owned(), json!(["py"]).to_string()),
    ];
    env.push(("PLURNK_MCP_CONNECT_TIMEOUT".into(), "30000".into()));
    let state = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gateway-elicit-{}.sqlite", std::process::id()));
    let plan = json!([
        {"op": "call", "tool": "py_ask_name"},
        {"op": "call", "tool": "py_ask_name_raw"}
    ])
    .to_string();
    for revision in ["2026-07-28", "2025-11-25"] {
        for answer in [true, false] {
            let mut args = vec![
                peer_script("gateway_client.py"),
                "--revision".into(),
                revision.into(),
                "--plan".into(),
                plan.clone(),
            ];
            if answer {
                args.extend(["--elicit".into(), json!({"name": "Ada"}).to_string()]);
            }
            args.extend([
                "--stdio".into(),
                EXE.into(),
                "--state".into(),
                state.to_string_lossy().into_owned(),
                "serve".into(),
            ]);
            let lines = drive(&peers.python, &args, &env);
            let label = format!("{revision}, answering: {answer}");
            assert_eq!(lines[0]["protocolVersion"], revision, "{label}");
            for (index, step) in lines[1..].iter().enumerate() {
                if answer {
                    // The upstream's question reached the client, and its answer the upstream.
                    assert_eq!(step["ok"], true, "{label}: {step}");
                    assert_eq!(
                        step["result"]["content"][0]["text"], "hello, Ada",
                        "{label}: {step}"
                    );
                    assert_eq!(
                        step["elicited"],
                        json!(["What is your name?"]),
                        "{label}: {step}"
                    );
                } else if index == 0 {
                    // A client that declared no elicitation: the upstream sees its capabilities
                    // (not the host's) and refuses, as it does when asked directly.
                    assert_eq!(step["ok"], false, "{label}: {step}");
                    assert_eq!(step["error"]["code"], -32021, "{label}: {step}");
                } else if revision == "2026-07-28" {
                    // A raw input request reaches the client itself, which cannot answer it.
                    assert_eq!(step["ok"], false, "{label}: {step}");
                } else {
                    // A session that cannot be asked is declined for: the upstream completes
                    // with what a declined question gives.
                    assert_eq!(step["ok"], true, "{label}: {step}");
                    assert_eq!(
                        step["result"]["content"][0]["text"], "no name given",
                        "{label}: {step}"
                    );
                }
            }
        }
    }
}
