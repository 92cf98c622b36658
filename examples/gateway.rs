//! The gateway benchmark: `plurnk-mcp serve` beside npm's `mcp-proxy`, both in front of the
//! same stdio server (the fixture), each driven by a plain HTTP/1.1 keep-alive client and by
//! the MCP Python SDK's client, at 2025-11-25 (sessions) and 2026-07-28 (stateless).
//!
//! ```text
//! cargo run --release --example gateway -- [--quick] [--calls N] [--json target/bench/gateway.json]
//! ```
//!
//! `scripts/bench.sh --gateway` installs the peers (Node 22, `mcp-proxy`, the Python SDK),
//! builds `plurnk-mcp` and the fixture in release mode and runs it. Each figure is the latency
//! of one `tools/call` of `echo`, measured in the client around the call, one call at a time
//! after a warm-up; the table gives p50 and p99, the JSON file every percentile and the setup.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use serde_json::{Value, json};

/// Where the repository is (for `.cache/`, `tests/peers/` and the default JSON path).
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Parser, Debug)]
#[command(about = "The gateway benchmark: plurnk-mcp serve beside npm's mcp-proxy")]
struct Args {
    /// Few calls (the test suite's smoke run).
    #[arg(long)]
    quick: bool,
    /// Timed calls per row [default: 2000, 50 with --quick].
    #[arg(long)]
    calls: Option<usize>,
    /// Where to write the figures [default: target/bench/gateway.json, or
    /// target/bench/gateway-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
    /// The plurnk-mcp binary [default: $PLURNK_BENCH_PLURNK, else next to this build].
    #[arg(long)]
    plurnk: Option<PathBuf>,
    /// The stdio server both gateways front [default: $PLURNK_BENCH_FIXTURE, else
    /// plurnk-mcp-fixture next to this build].
    #[arg(long)]
    fixture: Option<PathBuf>,
    /// Node 22 [default: $PLURNK_BENCH_NODE, else NODE22 of .cache/peers.env].
    #[arg(long)]
    node: Option<PathBuf>,
    /// mcp-proxy's entry point [default: $PLURNK_BENCH_MCP_PROXY, else MCP_PROXY of
    /// .cache/peers.env].
    #[arg(long)]
    mcp_proxy: Option<PathBuf>,
    /// The Python with the MCP SDK [default: $PLURNK_BENCH_PYTHON, else PYTHON_MCP of
    /// .cache/peers.env].
    #[arg(long)]
    python: Option<PathBuf>,
}

/// What a percentile list is cut at.
const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 100.0];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let calls = args.calls.unwrap_or(if args.quick { 50 } else { 2000 });
    let warmup = (calls / 10).max(10);
    let peers = read_peers_env();
    let near = |name: &str| -> Option<PathBuf> {
        let exe = std::env::current_exe().ok()?;
        let dir = exe.parent()?.parent()?;
        Some(dir.join(name))
    };
    let pick = |given: &Option<PathBuf>, var: &str, peer: &str, fallback: Option<PathBuf>| {
        given
            .clone()
            .or_else(|| std::env::var_os(var).map(PathBuf::from))
            .or_else(|| peers.get(peer).map(PathBuf::from))
            .or(fallback)
    };
    let plurnk = pick(&args.plurnk, "PLURNK_BENCH_PLURNK", "", near("plurnk-mcp"))
        .context("no plurnk-mcp binary: build it (cargo build --release) or give --plurnk")?;
    let fixture = pick(
        &args.fixture,
        "PLURNK_BENCH_FIXTURE",
        "",
        near("plurnk-mcp-fixture"),
    )
    .context("no fixture binary: cargo build --release -p plurnk-mcp-fixture, or --fixture")?;
    let node = pick(&args.node, "PLURNK_BENCH_NODE", "NODE22", None)
        .context("no Node 22: run scripts/install-peers.sh or give --node")?;
    let proxy = pick(&args.mcp_proxy, "PLURNK_BENCH_MCP_PROXY", "MCP_PROXY", None)
        .or_else(|| {
            let path = Path::new(ROOT)
                .join(".cache/mcp-proxy/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs");
            path.exists().then_some(path)
        })
        .context("no mcp-proxy: run scripts/install-peers.sh or give --mcp-proxy")?;
    let python = pick(&args.python, "PLURNK_BENCH_PYTHON", "PYTHON_MCP", None)
        .context("no Python with the MCP SDK: run scripts/install-peers.sh or give --python")?;
    for (what, path) in [
        ("plurnk-mcp", &plurnk),
        ("the fixture", &fixture),
        ("Node 22", &node),
        ("mcp-proxy", &proxy),
        ("Python", &python),
    ] {
        if !path.exists() {
            bail!("{what} is not at {}", path.display());
        }
    }
    let py_client = Path::new(ROOT).join("tests/peers/gateway_client.py");

    let scratch = std::env::temp_dir().join(format!("plurnk-gateway-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let gateway = Server::plurnk(&plurnk, &fixture, &scratch)?;
    let proxy = Server::mcp_proxy(&node, &proxy, &fixture)?;
    let mut rows = Vec::new();
    for server in [&gateway, &proxy] {
        for revision in ["2025-11-25", "2026-07-28"] {
            for driver in ["plain HTTP/1.1", "Python SDK"] {
                let latencies = match driver {
                    "plain HTTP/1.1" => plain(&server.address, revision, warmup, calls)?,
                    _ => python_sdk(&python, &py_client, &server.url(), revision, warmup, calls)?,
                };
                let row = Row::new(server.name, driver, revision, latencies);
                eprintln!(
                    "{:<18} {:<15} {}  p50 {:>8.3} ms  p99 {:>8.3} ms",
                    row.server,
                    row.driver,
                    row.revision,
                    row.p(50.0),
                    row.p(99.0)
                );
                rows.push(row);
            }
        }
    }
    drop(gateway);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&scratch);

    println!("| driver | revision | gateway | p50 (ms) | p99 (ms) |");
    println!("|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {:.3} | {:.3} |",
            row.driver,
            row.revision,
            row.server,
            row.p(50.0),
            row.p(99.0)
        );
    }
    let path = args.json.clone().unwrap_or_else(|| {
        Path::new(ROOT).join(if args.quick {
            "target/bench/gateway-quick.json"
        } else {
            "target/bench/gateway.json"
        })
    });
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let figures = json!({
        "calls": calls,
        "warmup": warmup,
        "tool": "echo {\"text\": \"hi\"}",
        "machine": machine(),
        "commit": commit(),
        "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
    });
    std::fs::write(&path, serde_json::to_string_pretty(&figures)?)?;
    eprintln!("figures written to {}", path.display());
    Ok(())
}

/// One gateway under test, stopped when dropped.
struct Server {
    name: &'static str,
    address: String,
    child: Child,
}

impl Server {
    fn url(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    /// `plurnk-mcp serve --transport http --unprefixed` on a workspace whose one server is the
    /// fixture over stdio.
    fn plurnk(plurnk: &Path, fixture: &Path, scratch: &Path) -> anyhow::Result<Self> {
        let mut child = Command::new(plurnk)
            .arg("--state")
            .arg(scratch.join("state.sqlite"))
            .args(["serve", "--transport", "http", "--unprefixed"])
            .env("PLURNK_MCP_FX", fixture)
            .env("PLURNK_MCP_FX_ARGS", json!(["--name", "fx"]).to_string())
            .env("PLURNK_MCP_ENABLED", json!(["fx"]).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("plurnk-mcp serve")?;
        let stderr = child.stderr.take().context("serve's stderr")?;
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
        let address = loop {
            let Some(line) = lines.next() else {
                bail!("plurnk-mcp serve ended before it printed its address");
            };
            let line = line?;
            if let Some(url) = line
                .split_whitespace()
                .find(|word| word.starts_with("http://"))
            {
                break url
                    .trim_start_matches("http://")
                    .trim_end_matches("/mcp")
                    .to_owned();
            }
        };
        // Its stderr is drained so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let server = Self {
            name: "plurnk-mcp serve",
            address,
            child,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// `mcp-proxy --port PORT --host 127.0.0.1 -- <fixture>`.
    fn mcp_proxy(node: &Path, proxy: &Path, fixture: &Path) -> anyhow::Result<Self> {
        // A port the kernel just had free; mcp-proxy takes no port 0.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(node)
            .arg(proxy)
            .args(["--port", &port.to_string(), "--host", "127.0.0.1", "--"])
            .arg(fixture)
            .args(["--name", "fx"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("mcp-proxy")?;
        let server = Self {
            name: "mcp-proxy 6.7.19",
            address: format!("127.0.0.1:{port}"),
            child,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Waits until a stateless call is answered.
    fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if plain(&self.address, "2026-07-28", 0, 1).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} at {} did not answer within 60 s",
                    self.name,
                    self.address
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
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

/// One row of the table: every latency of one (gateway, driver, revision).
struct Row {
    server: &'static str,
    driver: &'static str,
    revision: &'static str,
    /// Sorted, in microseconds.
    latencies: Vec<u64>,
}

impl Row {
    fn new(
        server: &'static str,
        driver: &'static str,
        revision: &'static str,
        mut latencies: Vec<u64>,
    ) -> Self {
        latencies.sort_unstable();
        Self {
            server,
            driver,
            revision,
            latencies,
        }
    }

    /// The `pct` percentile in milliseconds (nearest rank).
    fn p(&self, pct: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let rank = ((pct / 100.0) * self.latencies.len() as f64).ceil() as usize;
        let index = rank.clamp(1, self.latencies.len()) - 1;
        self.latencies[index] as f64 / 1000.0
    }

    fn json(&self) -> Value {
        let percentiles: serde_json::Map<String, Value> = PERCENTILES
            .iter()
            .map(|pct| (format!("p{pct}"), json!(self.p(*pct))))
            .collect();
        json!({
            "gateway": self.server,
            "driver": self.driver,
            "revision": self.revision,
            "calls": self.latencies.len(),
            "ms": percentiles,
        })
    }
}

/// `calls` timed `tools/call`s of `echo` on one keep-alive connection, after `warmup`
/// untimed ones: at 2025-11-25 in a session (initialize, initialized, then calls), at
/// 2026-07-28 stateless. Latencies in microseconds.
fn plain(address: &str, revision: &str, warmup: usize, calls: usize) -> anyhow::Result<Vec<u64>> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let legacy = revision == "2025-11-25";
    let mut session = None;
    if legacy {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": revision, "capabilities": {},
            "clientInfo": {"name": "plain-bench", "version": "1"}}});
        let (status, headers, _) = exchange(&mut stream, address, &initialize, &[])?;
        if status != 200 {
            bail!("initialize answered {status}");
        }
        let id = headers
            .lines()
            .find_map(|line| line.strip_prefix("mcp-session-id:"))
            .map(|id| id.trim().to_owned())
            .context("no Mcp-Session-Id")?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let with_session = [
            ("Mcp-Session-Id", id.as_str()),
            ("MCP-Protocol-Version", revision),
        ];
        exchange(&mut stream, address, &initialized, &with_session)?;
        session = Some(id);
    }
    let mut latencies = Vec::with_capacity(calls);
    for n in 0..warmup + calls {
        let mut params = json!({"name": "echo", "arguments": {"text": "hi"}});
        let mut headers = vec![("MCP-Protocol-Version", revision)];
        if let Some(id) = &session {
            headers.push(("Mcp-Session-Id", id.as_str()));
        } else {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": revision,
                "io.modelcontextprotocol/clientInfo": {"name": "plain-bench", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}
            });
            headers.push(("Mcp-Method", "tools/call"));
            headers.push(("Mcp-Name", "echo"));
        }
        let call = json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": params});
        let started = Instant::now();
        let (status, _, body) = exchange(&mut stream, address, &call, &headers)?;
        let elapsed = started.elapsed();
        if status != 200 || !body.contains("\"hi\"") {
            bail!("call {n} answered {status}: {body}");
        }
        if n >= warmup {
            latencies.push(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
        }
    }
    Ok(latencies)
}

/// One request and its whole answer on a keep-alive connection: (status, lower-cased header
/// lines, body).
fn exchange(
    stream: &mut TcpStream,
    host: &str,
    message: &Value,
    headers: &[(&str, &str)],
) -> anyhow::Result<(u16, String, String)> {
    let body = message.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes())?;

    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        let read = stream.read(&mut chunk)?;
        if read == 0 {
            bail!("the connection closed before an answer");
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let mut rest = buffer[head_end + 4..].to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let mut more = |rest: &mut Vec<u8>| -> anyhow::Result<()> {
        let read = stream.read(&mut chunk)?;
        if read == 0 {
            bail!("the connection closed inside an answer");
        }
        rest.extend_from_slice(&chunk[..read]);
        Ok(())
    };
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|length| length.trim().parse::<usize>().ok());
    let body = if let Some(length) = length {
        while rest.len() < length {
            more(&mut rest)?;
        }
        rest.truncate(length);
        rest
    } else if head.contains("transfer-encoding: chunked") {
        let mut body = Vec::new();
        loop {
            let Some(line_end) = rest.windows(2).position(|window| window == b"\r\n") else {
                more(&mut rest)?;
                continue;
            };
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..line_end]).trim(), 16)
                .context("a chunk size")?;
            while rest.len() < line_end + 2 + size + 2 {
                more(&mut rest)?;
            }
            if size == 0 {
                break;
            }
            body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            rest.drain(..line_end + 2 + size + 2);
        }
        body
    } else {
        Vec::new()
    };
    Ok((status, head, String::from_utf8_lossy(&body).into_owned()))
}

/// The Python SDK client's latencies (tests/peers/gateway_client.py's `time_calls`).
fn python_sdk(
    python: &Path,
    client: &Path,
    url: &str,
    revision: &str,
    warmup: usize,
    calls: usize,
) -> anyhow::Result<Vec<u64>> {
    let plan = json!([{"op": "time_calls", "tool": "echo", "arguments": {"text": "hi"},
                       "calls": calls, "warmup": warmup}]);
    let output = Command::new(python)
        .arg(client)
        .args([
            "--revision",
            revision,
            "--plan",
            &plan.to_string(),
            "--http",
            url,
        ])
        .stdin(Stdio::null())
        .output()
        .context("the Python SDK client")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["op"] == "time_calls")
        .with_context(|| {
            format!(
                "the Python SDK client timed nothing: {stdout}{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
    if line["ok"] != true {
        bail!("the Python SDK client's calls failed: {line}");
    }
    Ok(line["result"]["latencies_us"]
        .as_array()
        .map(|all| all.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default())
}

/// `.cache/peers.env` as a map (empty when it is missing).
fn read_peers_env() -> std::collections::BTreeMap<String, String> {
    std::fs::read_to_string(Path::new(ROOT).join(".cache/peers.env"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.trim_matches(['\'', '"']).to_owned()))
        .collect()
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|name| name.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    json!({
        "cpus": std::thread::available_parallelism().map(usize::from).unwrap_or(0),
        "cpu": cpu,
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
    })
}

fn commit() -> String {
    Command::new("git")
        .args(["-C", ROOT, "rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default()
}
