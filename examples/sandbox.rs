//! The sandbox's cost, side by side in one run: `servers` stdio fixture servers hydrated to
//! all-ready under the default sandbox policy and with the sandbox `off`, alternating, then
//! sequential `echo` calls on one of them; a table of medians and their ratio on stdout, the
//! figures in `target/bench/sandbox.json`.
//!
//! ```text
//! cargo run --release --features sandbox --example sandbox -- --fixture PATH \
//!     [--servers 200] [--rounds 5] [--calls 2000] [--json PATH]
//! ```
//!
//! `scripts/bench.sh --sandbox` builds the fixture and runs it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use plurnk_mcp::{CallOptions, Host, HostConfig, SandboxState, ServerState};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// The fixture server binary (`plurnk-mcp-fixture`).
    #[arg(long)]
    fixture: PathBuf,
    /// Servers hydrated at once.
    #[arg(long, default_value_t = 200)]
    servers: usize,
    /// Rounds, each one hydration under each policy, in turns.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Sequential calls per trial (after 200 to warm up).
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Where the figures go.
    #[arg(long, default_value = "target/bench/sandbox.json")]
    json: PathBuf,
}

/// One trial's figures.
struct Trial {
    ready_ms: f64,
    p50_us: f64,
    p99_us: f64,
}

/// `servers` fixture servers under `sandbox` (a policy's JSON, or none for the default).
fn config(fixture: &std::path::Path, servers: usize, sandbox: Option<&str>) -> HostConfig {
    let mut env = BTreeMap::new();
    let aliases: Vec<String> = (0..servers).map(|i| format!("s{i}")).collect();
    for alias in &aliases {
        env.insert(
            format!("PLURNK_MCP_{}", alias.to_ascii_uppercase()),
            fixture.display().to_string(),
        );
    }
    env.insert("PLURNK_MCP_ENABLED".to_owned(), json!(aliases).to_string());
    env.insert("PLURNK_MCP_CONNECT_TIMEOUT".to_owned(), "120000".to_owned());
    if let Some(sandbox) = sandbox {
        env.insert("PLURNK_MCP_SANDBOX".to_owned(), sandbox.to_owned());
    }
    HostConfig::from_env(env).unwrap_or_else(|errors| panic!("{errors}"))
}

async fn trial(args: &Args, sandbox: Option<&str>) -> anyhow::Result<Trial> {
    let config = config(&args.fixture, args.servers, sandbox);
    let started = Instant::now();
    let host = Host::start(config).await?;
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    let workspace = host.default_workspace();
    let snapshot = workspace.snapshot();
    let expected = if sandbox.is_some() {
        None
    } else {
        Some(SandboxState::Held)
    };
    for server in snapshot.servers.values() {
        if server.state != ServerState::Ready {
            bail!("{} is {}: {:?}", server.alias, server.state, server.problem);
        }
        if server.sandbox.as_ref().map(|report| report.state) != expected
            && !(expected.is_none()
                && server.sandbox.as_ref().map(|r| r.state) == Some(SandboxState::Off))
        {
            bail!("{}'s sandbox: {:?}", server.alias, server.sandbox);
        }
    }
    let mut latencies = Vec::with_capacity(args.calls);
    for i in 0..200 + args.calls {
        let began = Instant::now();
        let result = workspace
            .call_tool(
                "s0",
                "echo",
                json!({"text": "hello"}),
                CallOptions::default(),
            )
            .await
            .context("a sequential call")?;
        if result.text() != "hello" {
            bail!("a wrong answer: {}", result.text());
        }
        if i >= 200 {
            latencies.push(began.elapsed());
        }
    }
    let _ = host.shutdown().await;
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    Ok(Trial {
        ready_ms,
        p50_us: at(0.5).as_secs_f64() * 1e6,
        p99_us: at(0.99).as_secs_f64() * 1e6,
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let off = r#"{"mode": "off"}"#;
    // One hydration of each first: the machine's probe and the page cache, not measured.
    trial(&args, None).await?;
    trial(&args, Some(off)).await?;
    let mut runs: BTreeMap<&str, Vec<Trial>> = BTreeMap::new();
    for round in 0..args.rounds {
        // Which goes first alternates, so neither always meets a warmer machine.
        let order = if round % 2 == 0 {
            [("default", None), ("off", Some(off))]
        } else {
            [("off", Some(off)), ("default", None)]
        };
        for (name, sandbox) in order {
            let measured = trial(&args, sandbox).await?;
            eprintln!(
                "round {round} {name}: all ready in {:.0} ms, call p50 {:.0} µs",
                measured.ready_ms, measured.p50_us
            );
            runs.entry(name).or_default().push(measured);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let figures = |name: &str| {
        let trials = &runs[name];
        let mut ready: Vec<f64> = trials.iter().map(|t| t.ready_ms).collect();
        let mut p50: Vec<f64> = trials.iter().map(|t| t.p50_us).collect();
        let mut p99: Vec<f64> = trials.iter().map(|t| t.p99_us).collect();
        let spread = |values: &[f64]| {
            let (min, max) = values
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
            (min, max)
        };
        let (p50_min, p50_max) = spread(&p50);
        json!({
            "ready_ms": median(&mut ready),
            "ready_ms_all": trials.iter().map(|t| t.ready_ms).collect::<Vec<_>>(),
            "p50_us": median(&mut p50),
            "p50_us_min": p50_min,
            "p50_us_max": p50_max,
            "p99_us": median(&mut p99),
        })
    };
    let (default, off) = (figures("default"), figures("off"));
    let ratio =
        default["ready_ms"].as_f64().unwrap_or(0.0) / off["ready_ms"].as_f64().unwrap_or(1.0);
    println!(
        "{} stdio servers to all-ready, then {} sequential calls; medians of {} rounds",
        args.servers, args.calls, args.rounds
    );
    println!("| policy | all ready (ms) | call p50 (µs) | p50 range (µs) | call p99 (µs) |");
    println!("|---|---|---|---|---|");
    for (name, figures) in [("default sandbox", &default), ("off", &off)] {
        println!(
            "| {name} | {:.0} | {:.0} | {:.0}–{:.0} | {:.0} |",
            figures["ready_ms"].as_f64().unwrap_or_default(),
            figures["p50_us"].as_f64().unwrap_or_default(),
            figures["p50_us_min"].as_f64().unwrap_or_default(),
            figures["p50_us_max"].as_f64().unwrap_or_default(),
            figures["p99_us"].as_f64().unwrap_or_default(),
        );
    }
    println!("| ratio (default / off) | {ratio:.2}× | | | |");
    if let Some(dir) = args.json.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(
        &args.json,
        serde_json::to_string_pretty(&json!({
            "servers": args.servers,
            "rounds": args.rounds,
            "calls": args.calls,
            "default": default,
            "off": off,
            "ready_ratio": ratio,
        }))?,
    )?;
    Ok(())
}
