//! The zoo benchmark: ten servers people install from npm and PyPI
//! (`crates/cli/tests/support/zoo.rs`) brought up again and again on this machine while a
//! burner keeps every core busy. Each run is timed from the start until every server is ready
//! (or has failed), and records the revision each server got and how many processes each was
//! started as: the host with its default settings and, interleaved in the same run, the
//! official MCP Python SDK's client connecting the same ten at once
//! (`crates/cli/tests/peers/zoo_client.py`).
//!
//! ```text
//! cargo run --release --features sandbox --example zoo -- [--runs 20] [--json target/bench/zoo.json] [--no-python]
//! ```
//!
//! `scripts/bench.sh --zoo` installs the peers first. A table on stdout, every run's figures
//! in the JSON file.

#[path = "../crates/cli/tests/support/zoo.rs"]
mod zoo;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, bail};
use clap::Parser;
use plurnk_mcp::{Host, HostConfig, ServerState};
use serde_json::{Value, json};

use zoo::{ALIASES, Burner, Zoo};

/// Where the repository is (for `.cache/`, `tests/peers/` and the default JSON path).
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Parser, Debug)]
#[command(about = "The zoo benchmark: ten published servers brought up under load")]
struct Args {
    /// How many times each client brings the zoo up.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Where to write the figures.
    #[arg(long, default_value = "target/bench/zoo.json")]
    json: PathBuf,
    /// Time the host alone.
    #[arg(long)]
    no_python: bool,
}

/// One bring-up of the zoo by one client.
#[derive(Debug, Default)]
struct Run {
    /// Until every server was ready, when all were.
    all_ready_ms: Option<u64>,
    /// Per server: the revision it got, or why it failed.
    revisions: BTreeMap<String, Result<String, String>>,
    /// Per stdio server: how many processes it was started as in this run.
    starts: BTreeMap<String, usize>,
}

impl Run {
    fn json(&self) -> Value {
        json!({
            "all_ready_ms": self.all_ready_ms,
            "servers": self.revisions.iter().map(|(alias, got)| {
                let outcome = match got {
                    Ok(revision) => json!({"revision": revision}),
                    Err(why) => json!({"error": why}),
                };
                (alias.clone(), json!({"outcome": outcome, "starts": self.starts.get(alias)}))
            }).collect::<serde_json::Map<_, _>>(),
        })
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let root = Path::new(ROOT);
    let python = peers(root)?.get("PYTHON_MCP").cloned();
    let runtime = tokio::runtime::Runtime::new()?;
    let zoo = Zoo::start(root, root.join("target/bench/zoo-work"), true);
    let _burner = Burner::start();
    let mut host_runs = Vec::new();
    let mut python_runs = Vec::new();
    for run in 1..=args.runs {
        let host = runtime.block_on(host_run(&zoo))?;
        eprintln!("zoo: run {run}: host {}", summary(&host));
        host_runs.push(host);
        if args.no_python {
            continue;
        }
        let python = python_run(&zoo, python.as_deref())?;
        eprintln!("zoo: run {run}: python sdk {}", summary(&python));
        python_runs.push(python);
    }
    print_table(&host_runs, &python_runs);
    let figures = json!({
        "runs": args.runs,
        "machine": machine(),
        "host": host_runs.iter().map(Run::json).collect::<Vec<_>>(),
        "python_sdk": python_runs.iter().map(Run::json).collect::<Vec<_>>(),
    });
    if let Some(folder) = args.json.parent() {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&figures)?)
        .with_context(|| format!("writing {}", args.json.display()))?;
    eprintln!("zoo: figures in {}", args.json.display());
    Ok(())
}

fn peers(root: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(root.join(".cache/peers.env"))
        .context("run scripts/install-peers.sh first (scripts/bench.sh --zoo does)")?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.trim_matches(['\'', '"']).to_owned()))
        .collect())
}

fn starts(zoo: &Zoo) -> BTreeMap<String, usize> {
    ALIASES
        .iter()
        .map(|alias| ((*alias).to_owned(), zoo.starts(alias)))
        .collect()
}

/// The processes each stdio server was started as between `before` and now (the HTTP server
/// runs throughout, and is left out).
fn started_since(zoo: &Zoo, before: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    starts(zoo)
        .into_iter()
        .filter(|(alias, _)| alias != "excel")
        .map(|(alias, now)| {
            let then = before.get(&alias).copied().unwrap_or(0);
            (alias, now - then)
        })
        .collect()
}

/// The host with the defaults: from `Host::start` until it returns, which is once every
/// server has left `connecting`.
async fn host_run(zoo: &Zoo) -> anyhow::Result<Run> {
    let before = starts(zoo);
    let config = HostConfig::from_env(zoo.env()).map_err(|errors| anyhow::anyhow!("{errors}"))?;
    let started = Instant::now();
    let host = Host::start(config).await?;
    let elapsed = started.elapsed();
    let snapshot = host.default_workspace().snapshot();
    let revisions: BTreeMap<String, Result<String, String>> = ALIASES
        .iter()
        .map(|alias| {
            let server = snapshot.server(alias);
            let got = match server {
                Some(server) if server.state == ServerState::Ready => Ok(server
                    .negotiated
                    .as_ref()
                    .map_or_else(|| "?".to_owned(), |n| n.revision.clone())),
                Some(server) => Err(format!(
                    "{}: {}",
                    server.state,
                    server
                        .problem
                        .as_ref()
                        .map(|p| p.detail.chars().take(200).collect::<String>())
                        .unwrap_or_default()
                )),
                None => Err("not in the snapshot".to_owned()),
            };
            ((*alias).to_owned(), got)
        })
        .collect();
    let all = revisions.values().all(Result::is_ok);
    let report = host.shutdown().await;
    if !report.failures.is_empty() {
        eprintln!("zoo: shutdown: {:?}", report.failures);
    }
    Ok(Run {
        all_ready_ms: all.then(|| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)),
        revisions,
        starts: started_since(zoo, &before),
    })
}

/// The official Python SDK's client connecting the same ten at once.
fn python_run(zoo: &Zoo, python: Option<&str>) -> anyhow::Result<Run> {
    let Some(python) = python else {
        bail!("PYTHON_MCP missing from .cache/peers.env");
    };
    let before = starts(zoo);
    let script = Path::new(ROOT).join("crates/cli/tests/peers/zoo_client.py");
    let output = Command::new(python)
        .arg(&script)
        .arg(zoo.specs().to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .context("running zoo_client.py")?;
    let report: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "zoo_client.py printed {:?}",
            String::from_utf8_lossy(&output.stdout)
        )
    })?;
    let revisions = ALIASES
        .iter()
        .map(|alias| {
            let entry = &report["servers"][alias];
            let got = match entry["revision"].as_str() {
                Some(revision) => Ok(revision.to_owned()),
                None => Err(entry["error"].as_str().unwrap_or("no answer").to_owned()),
            };
            ((*alias).to_owned(), got)
        })
        .collect();
    Ok(Run {
        all_ready_ms: report["all_ready_ms"].as_u64(),
        revisions,
        starts: started_since(zoo, &before),
    })
}

fn summary(run: &Run) -> String {
    let failed: Vec<String> = run
        .revisions
        .iter()
        .filter_map(|(alias, got)| got.as_ref().err().map(|why| format!("{alias} ({why})")))
        .collect();
    match run.all_ready_ms {
        Some(ms) => format!("all ready in {ms} ms"),
        None => format!("not all ready: {}", failed.join("; ")),
    }
}

/// The `q`-quantile of `values` (sorted), nearest rank.
fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn print_table(host: &[Run], python: &[Run]) {
    println!("Time to all-ready, the zoo of ten servers, a burner on every core");
    println!(
        "{:<12} {:>5} {:>9} {:>9} {:>9} {:>9} {:>12}",
        "client", "runs", "all ready", "p50 ms", "p90 ms", "max ms", "processes"
    );
    let mut medians = Vec::new();
    for (name, runs) in [("host", host), ("python sdk", python)] {
        if runs.is_empty() {
            continue;
        }
        let mut times: Vec<u64> = runs.iter().filter_map(|run| run.all_ready_ms).collect();
        times.sort_unstable();
        let most = runs
            .iter()
            .flat_map(|run| run.starts.values().copied())
            .max()
            .unwrap_or(0);
        let shown = |value: Option<u64>| value.map_or_else(|| "-".to_owned(), |v| v.to_string());
        println!(
            "{:<12} {:>5} {:>9} {:>9} {:>9} {:>9} {:>12}",
            name,
            runs.len(),
            times.len(),
            shown(quantile(&times, 0.5)),
            shown(quantile(&times, 0.9)),
            shown(times.last().copied()),
            format!("at most {most}"),
        );
        medians.push((name, quantile(&times, 0.5)));
    }
    if let [(_, Some(host)), (_, Some(python))] = medians.as_slice() {
        println!(
            "host p50 / python sdk p50: {:.2}",
            *host as f64 / *python as f64
        );
    }
    println!();
    println!("Revisions each server got, over every run");
    println!("{:<12} {:<28} {:<28}", "server", "host", "python sdk");
    for alias in ALIASES {
        let seen = |runs: &[Run]| {
            let set: BTreeSet<String> = runs
                .iter()
                .map(|run| match run.revisions.get(alias) {
                    Some(Ok(revision)) => revision.clone(),
                    Some(Err(_)) => "failed".to_owned(),
                    None => "-".to_owned(),
                })
                .collect();
            set.into_iter().collect::<Vec<_>>().join(", ")
        };
        println!("{:<12} {:<28} {:<28}", alias, seen(host), seen(python));
    }
}

/// What the figures were measured on.
fn machine() -> Value {
    json!({
        "cores": std::thread::available_parallelism().map_or(0, usize::from),
        "burner": "a busy shell loop per core",
    })
}
