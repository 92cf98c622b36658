//! The gateway benchmark: `plurnk-mcp serve` beside the gateways users run today (npm's
//! `mcp-proxy` and `supergateway`, PyPI's `mcp-proxy`, ContextForge's `mcpgateway.translate`),
//! each in front of the same stdio server (the fixture), each driven by the same clients: a
//! plain HTTP/1.1 keep-alive client at 2025-11-25 (a session) and 2026-07-28 (stateless), the
//! official Python SDK client at both revisions, the official TypeScript SDK client, and 16
//! plain clients at once.
//!
//! ```text
//! cargo run --release --example gateway -- [--quick] [--calls N] [--rounds R] [--json PATH]
//! ```
//!
//! `scripts/bench.sh --gateway` installs every gateway and client (pinned), builds
//! `plurnk-mcp` and the fixture in release mode and runs it. Each latency is one `tools/call`
//! of `echo`, measured in the client around the call, one call at a time after a warm-up (the
//! 16 clients: each one call at a time, all at once). The rounds interleave: every gateway gets
//! a share of a client's calls before any gets the next share, so a machine that slows down
//! slows every gateway alike. Per row: p50 and p99, calls per second (calls over the time the
//! timed calls took; for the 16 clients, over the wall time), the gateway's resident memory
//! after its row, and its CPU time per call (user and system, every process of the gateway but
//! the fixture, over every call it served for the row, warm-ups included). The table goes to
//! stdout, every figure with the machine and the commit to the JSON file.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use serde_json::{Value, json};

/// Where the repository is (for `.cache/` and the default JSON path).
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Parser, Debug)]
#[command(about = "The gateway benchmark: plurnk-mcp serve beside the gateways users run")]
struct Args {
    /// Few calls, one round (the test suite's smoke run).
    #[arg(long)]
    quick: bool,
    /// Timed calls per row [default: 1500, 40 with --quick]; the 16 clients make this many
    /// each.
    #[arg(long)]
    calls: Option<usize>,
    /// Rounds the calls are split into, interleaved across the gateways [default: 3, 1 with
    /// --quick].
    #[arg(long)]
    rounds: Option<usize>,
    /// Where to write the figures [default: target/bench/gateway.json, or
    /// target/bench/gateway-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
    /// Only the gateways whose name holds one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// What a percentile list is cut at.
const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 100.0];

/// How many plain clients call at once in the concurrent row.
const CONCURRENT: usize = 16;

/// The clients, in the table's order: (driver, revision).
const CLIENTS: [(&str, &str); 6] = [
    ("plain HTTP/1.1", "2025-11-25"),
    ("plain HTTP/1.1", "2026-07-28"),
    ("Python SDK", "2025-11-25"),
    ("Python SDK", "2026-07-28"),
    ("TypeScript SDK", "auto"),
    ("16 plain clients", "2025-11-25"),
];

/// Paths of everything the run needs, from the environment `scripts/bench.sh` sets, else
/// `.cache/peers.env`.
struct Tools {
    plurnk: PathBuf,
    fixture: PathBuf,
    node: PathBuf,
    npm_proxy: PathBuf,
    supergateway: PathBuf,
    py_proxy: PathBuf,
    contextforge: PathBuf,
    python: PathBuf,
    py_client: PathBuf,
    ts_client: PathBuf,
    ts_client_dir: PathBuf,
}

impl Tools {
    fn find() -> anyhow::Result<Self> {
        let peers = read_peers_env();
        let near = |name: &str| -> Option<PathBuf> {
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.join(name))
        };
        let pick = |var: &str, peer: &str, fallback: Option<PathBuf>| -> anyhow::Result<PathBuf> {
            let path = std::env::var_os(var)
                .map(PathBuf::from)
                .or_else(|| peers.get(peer).map(PathBuf::from))
                .or(fallback)
                .with_context(|| format!("no {var}: run scripts/bench.sh --gateway"))?;
            if !path.exists() {
                bail!("{var} is {}, which does not exist", path.display());
            }
            Ok(path)
        };
        let cache = Path::new(ROOT).join(".cache");
        Ok(Self {
            plurnk: pick("PLURNK_BENCH_PLURNK", "", near("plurnk-mcp"))?,
            fixture: pick("PLURNK_BENCH_FIXTURE", "", near("plurnk-mcp-fixture"))?,
            node: pick("PLURNK_BENCH_NODE", "NODE22", None)?,
            npm_proxy: pick("PLURNK_BENCH_MCP_PROXY", "MCP_PROXY", None)?,
            supergateway: pick(
                "PLURNK_BENCH_SUPERGATEWAY",
                "",
                Some(cache.join("bench-gateways/node_modules/supergateway/dist/index.js")),
            )?,
            py_proxy: pick(
                "PLURNK_BENCH_PY_PROXY",
                "",
                Some(cache.join("bench-pyproxy/bin/mcp-proxy")),
            )?,
            contextforge: pick(
                "PLURNK_BENCH_CONTEXTFORGE",
                "",
                Some(cache.join("bench-contextforge/bin/python")),
            )?,
            python: pick("PLURNK_BENCH_PYTHON", "PYTHON_MCP", None)?,
            py_client: pick("PLURNK_BENCH_PY_CLIENT", "GATEWAY_PY_CLIENT", None)?,
            ts_client: pick("PLURNK_BENCH_TS_CLIENT_SCRIPT", "GATEWAY_TS_CLIENT", None)?,
            ts_client_dir: pick("PLURNK_BENCH_TS_CLIENT", "TS_CLIENT_DIR", None)?,
        })
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let calls = args.calls.unwrap_or(if args.quick { 40 } else { 1500 });
    let rounds = args
        .rounds
        .unwrap_or(if args.quick { 1 } else { 3 })
        .clamp(1, calls.max(1));
    let tools = Tools::find()?;
    let scratch = std::env::temp_dir().join(format!("plurnk-gateway-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let mut gateways = Vec::new();
    for kind in Kind::ALL {
        if !args.only.is_empty() && !args.only.iter().any(|only| kind.name().contains(only)) {
            continue;
        }
        gateways.push(Gateway::start(kind, &tools, &scratch)?);
    }
    let mut rows = Vec::new();
    for (driver, revision) in CLIENTS {
        let mut cells: Vec<Cell> = gateways.iter().map(|_| Cell::default()).collect();
        for round in 0..rounds {
            let share = calls / rounds + usize::from(round < calls % rounds);
            for (gateway, cell) in gateways.iter().zip(cells.iter_mut()) {
                if cell.error.is_some() {
                    continue;
                }
                let warmup = (share / 10).max(5);
                let before = gateway.cpu_ticks();
                let measured = drive(&tools, gateway, driver, revision, warmup, share);
                let ticks = gateway.cpu_ticks().saturating_sub(before);
                match measured {
                    Ok(run) => cell.add(run, ticks),
                    Err(error) => cell.error = Some(format!("{error:#}")),
                }
            }
        }
        for (gateway, cell) in gateways.iter().zip(cells) {
            let row = Row::new(gateway, driver, revision, cell);
            eprintln!("{}", row.line());
            rows.push(row);
        }
    }
    let versions: Vec<Value> = gateways
        .iter()
        .map(|gateway| json!({"gateway": gateway.kind.name(), "command": gateway.command}))
        .collect();
    drop(gateways);
    let _ = std::fs::remove_dir_all(&scratch);

    println!(
        "| client | revision | gateway | p50 (ms) | p99 (ms) | calls/s | RSS (MB) | CPU per call (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{}", row.markdown());
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
        "rounds": rounds,
        "concurrent": CONCURRENT,
        "tool": "echo {\"text\": \"hi\"}",
        "gateways": versions,
        "machine": machine(),
        "commit": commit(),
        "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
    });
    std::fs::write(&path, serde_json::to_string_pretty(&figures)?)?;
    eprintln!("figures written to {}", path.display());
    let failed: Vec<String> = rows
        .iter()
        .filter(|row| row.cell.error.is_some() && row.gateway == Kind::Plurnk.name())
        .map(|row| format!("{} {}", row.driver, row.revision))
        .collect();
    if !failed.is_empty() {
        bail!("plurnk-mcp serve failed rows: {}", failed.join(", "));
    }
    Ok(())
}

/// The gateways measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plurnk,
    NpmProxy,
    Supergateway,
    PyProxy,
    ContextForge,
}

impl Kind {
    const ALL: [Self; 5] = [
        Self::Plurnk,
        Self::NpmProxy,
        Self::Supergateway,
        Self::PyProxy,
        Self::ContextForge,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Plurnk => "plurnk-mcp serve",
            Self::NpmProxy => "mcp-proxy 6.7.19 (npm)",
            Self::Supergateway => "supergateway 4.0.0",
            Self::PyProxy => "mcp-proxy 0.13.0 (PyPI)",
            Self::ContextForge => "ContextForge translate 1.0.7",
        }
    }
}

/// One gateway under test, its process group stopped when dropped.
struct Gateway {
    kind: Kind,
    address: String,
    command: String,
    child: Child,
    /// The fixture's executable, whose processes are not the gateway's.
    fixture: PathBuf,
}

/// A Node preload that binds every listening server to loopback: supergateway has no host
/// option and would listen on every interface.
const LOOPBACK_PRELOAD: &str = r#"const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || typeof args[0] === 'string') {
    if (typeof args[1] === 'string') args[1] = '127.0.0.1';
    else args.splice(1, 0, '127.0.0.1');
  } else if (args[0] && typeof args[0] === 'object' && args[0].port !== undefined) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  return listen.apply(this, args);
};
"#;

impl Gateway {
    fn start(kind: Kind, tools: &Tools, scratch: &Path) -> anyhow::Result<Self> {
        let fixture = tools.fixture.display().to_string();
        let fixture_line = format!("{fixture} --name fx");
        // A port the kernel just had free; only plurnk-mcp takes port 0.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port()
            .to_string();
        let mut command = match kind {
            Kind::Plurnk => {
                let mut command = Command::new(&tools.plurnk);
                command
                    .arg("--state")
                    .arg(scratch.join("state.sqlite"))
                    .args(["serve", "--transport", "http", "--unprefixed"])
                    .args(["--listen", &format!("127.0.0.1:{port}")])
                    .env("PLURNK_MCP_FX", &tools.fixture)
                    .env("PLURNK_MCP_FX_ARGS", json!(["--name", "fx"]).to_string())
                    .env("PLURNK_MCP_ENABLED", json!(["fx"]).to_string());
                command
            }
            Kind::NpmProxy => {
                let mut command = Command::new(&tools.node);
                command
                    .arg(&tools.npm_proxy)
                    .args(["--port", &port, "--host", "127.0.0.1", "--", &fixture])
                    .args(["--name", "fx"]);
                command
            }
            Kind::Supergateway => {
                let preload = scratch.join("loopback.cjs");
                std::fs::write(&preload, LOOPBACK_PRELOAD)?;
                let mut command = Command::new(&tools.node);
                command
                    .arg("--require")
                    .arg(&preload)
                    .arg(&tools.supergateway)
                    .args([
                        "--stdio",
                        &fixture_line,
                        "--outputTransport",
                        "streamableHttp",
                    ])
                    .args(["--stateful", "--port", &port]);
                command
            }
            Kind::PyProxy => {
                let mut command = Command::new(&tools.py_proxy);
                command
                    .args(["--port", &port, "--host", "127.0.0.1", "--", &fixture])
                    .args(["--name", "fx"]);
                command
            }
            Kind::ContextForge => {
                // Its settings refuse to load without secrets of their own (a JWT key, an
                // encryption secret, passwords that are not the defaults): fresh ones per run,
                // which the bridge itself never uses.
                let secret = || format!("{:032x}{:032x}", rand_u128(), rand_u128());
                let mut command = Command::new(&tools.contextforge);
                command
                    .args(["-m", "mcpgateway.translate", "--stdio", &fixture_line])
                    .args(["--port", &port, "--host", "127.0.0.1"])
                    .args(["--expose-streamable-http", "--jsonResponse"])
                    .args(["--logLevel", "warning"])
                    .env("JWT_SECRET_KEY", secret())
                    .env("AUTH_ENCRYPTION_SECRET", secret())
                    .env("PLATFORM_ADMIN_PASSWORD", format!("Aa1!{}", secret()))
                    .env("BASIC_AUTH_PASSWORD", format!("Aa1!{}", secret()));
                command
            }
        };
        command
            .current_dir(scratch)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(
                scratch.join(format!("{kind:?}.log")),
            )?))
            .process_group(0);
        let shown = format!(
            "{} {}",
            command.get_program().to_string_lossy(),
            command
                .get_args()
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", kind.name()))?;
        let gateway = Self {
            kind,
            address: format!("127.0.0.1:{port}"),
            command: shown,
            child,
            fixture: tools.fixture.clone(),
        };
        gateway.wait_ready(scratch)?;
        gateway.only_on_loopback(&port)?;
        Ok(gateway)
    }

    /// Waits until a 2025-11-25 session answers a call.
    fn wait_ready(&self, scratch: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let last = match plain(&self.address, "2025-11-25", 0, 1) {
                Ok(_) => return Ok(()),
                Err(error) => format!("{error:#}"),
            };
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(scratch.join(format!("{:?}.log", self.kind)))
                    .unwrap_or_default();
                bail!(
                    "{} at {} did not answer within 90 s ({last}): {}",
                    self.kind.name(),
                    self.address,
                    log.chars()
                        .rev()
                        .take(2000)
                        .collect::<String>()
                        .chars()
                        .rev()
                        .collect::<String>()
                );
            }
            // Each try opens a session: spaced so a slow start does not meet a session bound.
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Fails when a process of the gateway listens on `port` anywhere but loopback.
    fn only_on_loopback(&self, port: &str) -> anyhow::Result<()> {
        let port: u16 = port.parse()?;
        for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let table = std::fs::read_to_string(file).unwrap_or_default();
            for line in table.lines().skip(1) {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (Some(local), Some(state)) = (fields.get(1), fields.get(3)) else {
                    continue;
                };
                let Some((address, hex_port)) = local.rsplit_once(':') else {
                    continue;
                };
                // 0A: listening.
                if *state != "0A" || u16::from_str_radix(hex_port, 16).ok() != Some(port) {
                    continue;
                }
                let loopback = address == "0100007F"
                    || address == "00000000000000000000000001000000"
                    || address == "0000000000000000FFFF00000100007F";
                if !loopback {
                    bail!("{} listens on {local}, not loopback", self.kind.name());
                }
            }
        }
        Ok(())
    }

    /// The processes of the gateway: its group, less the fixture's processes.
    fn processes(&self) -> Vec<u32> {
        let group = self.child.id();
        let fixture = self
            .fixture
            .file_name()
            .map(|name| name.to_string_lossy().into_owned());
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_string_lossy().parse::<u32>().ok())
            .filter(|pid| {
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    return false;
                };
                let Some(after) = stat.rsplit_once(')').map(|(_, after)| after) else {
                    return false;
                };
                // Fields after the name: state, ppid, pgrp.
                let in_group = after.split_whitespace().nth(2) == Some(&group.to_string());
                let is_fixture = std::fs::read_link(format!("/proc/{pid}/exe"))
                    .ok()
                    .and_then(|exe| {
                        exe.file_name()
                            .map(|name| name.to_string_lossy().into_owned())
                    })
                    == fixture;
                in_group && !is_fixture
            })
            .collect()
    }

    /// User and system CPU ticks of the gateway's processes (their finished threads included).
    fn cpu_ticks(&self) -> u64 {
        self.processes()
            .iter()
            .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
            .filter_map(|stat| {
                let after = stat.rsplit_once(')')?.1.to_owned();
                let fields: Vec<&str> = after.split_whitespace().collect();
                // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
                Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
            })
            .sum()
    }

    /// Resident memory of the gateway's processes, in kilobytes.
    fn rss_kib(&self) -> u64 {
        self.processes()
            .iter()
            .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .filter_map(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix("VmRSS:"))
                    .and_then(|kib| kib.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .sum()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let group = -(self.child.id() as i32);
        // SAFETY: kill(2) on the process group of our own child.
        unsafe {
            libc::kill(group, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // What is left of the group (a child the gateway leaves running on SIGTERM).
        // SAFETY: as above.
        unsafe {
            libc::kill(group, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// What one run of a client measured.
struct Run {
    /// Each timed call, in microseconds.
    latencies: Vec<u64>,
    /// The wall time of the timed calls (the 16 clients: from the first start to the last
    /// end).
    wall: Duration,
    /// Every call the gateway served for the run, warm-ups included.
    served: usize,
}

/// One client's figures against one gateway, over every round.
#[derive(Default)]
struct Cell {
    latencies: Vec<u64>,
    wall: Duration,
    served: usize,
    ticks: u64,
    error: Option<String>,
    /// The revision the TypeScript client negotiated.
    negotiated: Option<String>,
}

impl Cell {
    fn add(&mut self, run: (Run, Option<String>), ticks: u64) {
        let (run, negotiated) = run;
        self.latencies.extend(run.latencies);
        self.wall += run.wall;
        self.served += run.served;
        self.ticks += ticks;
        if negotiated.is_some() {
            self.negotiated = negotiated;
        }
    }
}

/// One client against one gateway: `calls` timed calls after `warmup`; the revision the
/// client negotiated when it says.
fn drive(
    tools: &Tools,
    gateway: &Gateway,
    driver: &str,
    revision: &str,
    warmup: usize,
    calls: usize,
) -> anyhow::Result<(Run, Option<String>)> {
    let url = format!("http://{}/mcp", gateway.address);
    match driver {
        "plain HTTP/1.1" => {
            let latencies = plain(&gateway.address, revision, warmup, calls)?;
            let wall = Duration::from_micros(latencies.iter().sum());
            Ok((
                Run {
                    latencies,
                    wall,
                    served: warmup + calls,
                },
                None,
            ))
        }
        "16 plain clients" => {
            let started = Instant::now();
            let handles: Vec<_> = (0..CONCURRENT)
                .map(|_| {
                    let address = gateway.address.clone();
                    let revision = revision.to_owned();
                    std::thread::spawn(move || plain(&address, &revision, warmup, calls))
                })
                .collect();
            let mut latencies = Vec::new();
            for handle in handles {
                let got = handle
                    .join()
                    .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
                latencies.extend(got);
            }
            Ok((
                Run {
                    latencies,
                    wall: started.elapsed(),
                    served: CONCURRENT * (warmup + calls),
                },
                None,
            ))
        }
        "Python SDK" => {
            let mut command = Command::new(&tools.python);
            command
                .arg(&tools.py_client)
                .args(["--revision", revision, "--listen", "auto"]);
            sdk(command, &url, warmup, calls)
        }
        _ => {
            let mut command = Command::new(&tools.node);
            command
                .arg(&tools.ts_client)
                .arg("--client-dir")
                .arg(&tools.ts_client_dir)
                .args(["--revision", revision]);
            sdk(command, &url, warmup, calls)
        }
    }
}

/// An SDK client's timed calls (`time_calls` of `gateway_client.py` and `.mjs`).
fn sdk(
    mut command: Command,
    url: &str,
    warmup: usize,
    calls: usize,
) -> anyhow::Result<(Run, Option<String>)> {
    let plan = json!([{"op": "time_calls", "tool": "echo", "arguments": {"text": "hi"},
                       "calls": calls, "warmup": warmup}]);
    let output = command
        .args(["--plan", &plan.to_string(), "--http", url])
        .stdin(Stdio::null())
        .output()
        .context("the SDK client")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .collect();
    let negotiated = lines
        .iter()
        .find(|line| line["op"] == "connected")
        .and_then(|line| line["protocolVersion"].as_str())
        .map(str::to_owned);
    let line = lines
        .iter()
        .find(|line| line["op"] == "time_calls")
        .with_context(|| {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: String = stderr
                .chars()
                .rev()
                .take(600)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!("the client timed nothing: {tail}")
        })?;
    if line["ok"] != true {
        bail!("the client's calls failed: {}", line["error"]);
    }
    let latencies: Vec<u64> = line["result"]["latencies_us"]
        .as_array()
        .map(|all| all.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let wall = Duration::from_micros(latencies.iter().sum());
    Ok((
        Run {
            latencies,
            wall,
            served: warmup + calls,
        },
        negotiated,
    ))
}

/// One row of the table.
struct Row {
    gateway: &'static str,
    driver: &'static str,
    revision: String,
    cell: Cell,
    rss_kib: u64,
}

impl Row {
    fn new(gateway: &Gateway, driver: &'static str, revision: &str, mut cell: Cell) -> Self {
        cell.latencies.sort_unstable();
        let revision = match &cell.negotiated {
            Some(negotiated) if revision == "auto" => format!("auto: {negotiated}"),
            _ => revision.to_owned(),
        };
        Self {
            gateway: gateway.kind.name(),
            driver,
            revision,
            cell,
            rss_kib: gateway.rss_kib(),
        }
    }

    /// The `pct` percentile in milliseconds (nearest rank).
    fn p(&self, pct: f64) -> f64 {
        let latencies = &self.cell.latencies;
        if latencies.is_empty() {
            return f64::NAN;
        }
        let rank = ((pct / 100.0) * latencies.len() as f64).ceil() as usize;
        latencies[rank.clamp(1, latencies.len()) - 1] as f64 / 1000.0
    }

    fn calls_per_second(&self) -> f64 {
        self.cell.latencies.len() as f64 / self.cell.wall.as_secs_f64()
    }

    /// The gateway's CPU time per call it served, in milliseconds.
    fn cpu_ms_per_call(&self) -> f64 {
        // SAFETY: sysconf(3) reads a constant.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        self.cell.ticks as f64 * 1000.0 / hz / self.cell.served.max(1) as f64
    }

    fn line(&self) -> String {
        match &self.cell.error {
            Some(error) => format!(
                "{:<28} {:<16} {:<16} failed: {error}",
                self.gateway, self.driver, self.revision
            ),
            None => format!(
                "{:<28} {:<16} {:<16} p50 {:>7.3} ms  p99 {:>7.3} ms  {:>7.0}/s  {:>6.1} MB  {:.3} ms CPU/call",
                self.gateway,
                self.driver,
                self.revision,
                self.p(50.0),
                self.p(99.0),
                self.calls_per_second(),
                self.rss_kib as f64 / 1024.0,
                self.cpu_ms_per_call()
            ),
        }
    }

    fn markdown(&self) -> String {
        match &self.cell.error {
            Some(error) => {
                let short: String = error
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(90)
                    .collect();
                format!(
                    "| {} | {} | {} | failed: {} | | | | |",
                    self.driver,
                    self.revision,
                    self.gateway,
                    short.replace('|', "/")
                )
            }
            None => format!(
                "| {} | {} | {} | {:.3} | {:.3} | {:.0} | {:.1} | {:.3} |",
                self.driver,
                self.revision,
                self.gateway,
                self.p(50.0),
                self.p(99.0),
                self.calls_per_second(),
                self.rss_kib as f64 / 1024.0,
                self.cpu_ms_per_call()
            ),
        }
    }

    fn json(&self) -> Value {
        let percentiles: serde_json::Map<String, Value> = PERCENTILES
            .iter()
            .map(|pct| (format!("p{pct}"), json!(self.p(*pct))))
            .collect();
        json!({
            "gateway": self.gateway,
            "driver": self.driver,
            "revision": self.revision,
            "calls": self.cell.latencies.len(),
            "served": self.cell.served,
            "ms": percentiles,
            "calls_per_second": self.calls_per_second(),
            "rss_mb": self.rss_kib as f64 / 1024.0,
            "cpu_ms_per_call": self.cpu_ms_per_call(),
            "error": self.cell.error,
        })
    }
}

/// `calls` timed `tools/call`s of `echo` on one keep-alive connection, after `warmup`
/// untimed ones: at 2025-11-25 in a session (initialize, initialized, then calls), at
/// 2026-07-28 stateless. Latencies in microseconds.
fn plain(address: &str, revision: &str, warmup: usize, calls: usize) -> anyhow::Result<Vec<u64>> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_nodelay(true)?;
    let legacy = revision == "2025-11-25";
    let mut session = None;
    if legacy {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": revision, "capabilities": {},
            "clientInfo": {"name": "plain-bench", "version": "1"}}});
        let (status, headers, body) = exchange(&mut stream, address, &initialize, &[])?;
        if status != 200 {
            bail!("initialize answered {status}: {body}");
        }
        // A gateway without sessions (a stateless one) gives no id: calls go without.
        session = headers.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        });
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let mut with_session = vec![("MCP-Protocol-Version", revision)];
        if let Some(id) = &session {
            with_session.push(("Mcp-Session-Id", id.as_str()));
        }
        exchange(&mut stream, address, &initialized, &with_session)?;
    }
    let mut latencies = Vec::with_capacity(calls);
    for n in 0..warmup + calls {
        let mut params = json!({"name": "echo", "arguments": {"text": "hi"}});
        let mut headers = vec![("MCP-Protocol-Version", revision)];
        if let Some(id) = &session {
            headers.push(("Mcp-Session-Id", id.as_str()));
        } else if !legacy {
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
            let body: String = body.chars().take(300).collect();
            bail!("call {n} answered {status}: {body}");
        }
        if n >= warmup {
            latencies.push(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
        }
    }
    Ok(latencies)
}

/// One request and its whole answer on a keep-alive connection: (status, header lines as
/// sent, body).
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
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let lower = head.to_ascii_lowercase();
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
    let length = lower
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|length| length.trim().parse::<usize>().ok());
    let body = if let Some(length) = length {
        while rest.len() < length {
            more(&mut rest)?;
        }
        rest.truncate(length);
        rest
    } else if lower.contains("transfer-encoding: chunked") {
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

/// A random number from the kernel.
fn rand_u128() -> u128 {
    let mut bytes = [0u8; 16];
    if let Ok(mut random) = std::fs::File::open("/dev/urandom") {
        let _ = random.read_exact(&mut bytes);
    }
    u128::from_le_bytes(bytes)
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
