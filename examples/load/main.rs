//! The load benchmark of issue 5: plurnk-mcp's `Host` side by side with raw rmcp, the official
//! TypeScript client and a bare JSON-RPC loop, all against the same fixture server binary over
//! stdio, all negotiating 2026-07-28.
//!
//! ```text
//! cargo run --release --example load -- [--quick] [--large] [--json target/bench/load.json]
//!                                       [--reps N]
//!                                       [--only seq,conc,spread,hydrate,inproc,churn,toggle]
//!                                       [--clients host,rmcp,ts,bare] [--fixture PATH]
//! ```
//!
//! `scripts/bench.sh` installs Node 22 and `@modelcontextprotocol/client` first and runs it.
//! Every trial runs in a fresh child process of this binary (`--trial <json>`), so memory
//! figures and leftovers of one client never touch another; the clients are alternated
//! (rotated) from one repetition to the next so machine drift hits all alike, and each
//! figure is the median of the repetitions (3 by default, 1 with `--quick`).

mod clients;
mod host_in_process;
mod otel;
mod report;
mod spec;
mod stats;
mod trial;
mod ts;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use tokio::io::AsyncReadExt;

use report::{Group, Report};
use spec::{Client, TrialResult, TrialSpec, Workload};

/// Where the repository is (for `.cache/`, `bench/` and the default JSON path).
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Parser, Debug)]
#[command(about = "Load benchmark: plurnk-mcp vs raw rmcp vs the TypeScript client vs a bare loop")]
struct Args {
    /// Tiny sizes and one repetition (the test suite's run; well under 30 s).
    #[arg(long)]
    quick: bool,
    /// Add the 100,000-server in-process hydration (over 10 GB of memory, minutes on 2 cores).
    #[arg(long)]
    large: bool,
    /// Where to write the JSON figures [default: target/bench/load.json, or
    /// target/bench/load-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
    /// Repetitions per figure (the median is reported) [default: 3, 1 with --quick].
    #[arg(long)]
    reps: Option<usize>,
    /// Only these workloads (comma-separated: seq, conc, spread, hydrate, inproc, churn,
    /// toggle).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only these clients (comma-separated: host, rmcp, ts, bare).
    #[arg(long, value_delimiter = ',')]
    clients: Vec<String>,
    /// The fixture server binary [default: $PLURNK_BENCH_FIXTURE, else plurnk-mcp-fixture
    /// next to this build, built if missing].
    #[arg(long)]
    fixture: Option<PathBuf>,
    /// Node 22 [default: $PLURNK_BENCH_NODE, else .cache/node22/node_modules/node/bin/node].
    #[arg(long)]
    node: Option<PathBuf>,
    /// The npm prefix holding @modelcontextprotocol/client [default: $PLURNK_BENCH_TS_DIR,
    /// else .cache/bench-npm].
    #[arg(long)]
    ts_dir: Option<PathBuf>,
    /// Internal: run one trial described by this JSON and print its result.
    #[arg(long, hide = true)]
    trial: Option<String>,
}

/// Sizes of one run.
struct Sizes {
    seq: usize,
    conc: usize,
    in_flight: usize,
    spread_servers: usize,
    hydrate: Vec<usize>,
    /// In-process hydrations, smallest first: the growth from one to the next is reported.
    in_process: Vec<usize>,
    churn: usize,
    churn_in_flight: usize,
    churn_servers: usize,
    /// Workspaces in which one server is disabled and enabled again, `toggles` times each.
    toggle: Vec<usize>,
    toggles: usize,
    warmup: usize,
    trial_timeout: Duration,
}

impl Sizes {
    fn new(quick: bool, large: bool) -> Sizes {
        let mut sizes = Sizes::of(quick);
        if large {
            sizes.in_process.push(100_000);
            // The baseline's O(N²) commits took minutes at this size.
            sizes.trial_timeout = Duration::from_secs(1_800);
        }
        sizes
    }

    fn of(quick: bool) -> Sizes {
        if quick {
            Sizes {
                seq: 200,
                conc: 1_000,
                in_flight: 64,
                spread_servers: 3,
                hydrate: vec![10],
                in_process: vec![100, 300],
                churn: 1_000,
                churn_in_flight: 16,
                churn_servers: 2,
                toggle: vec![10, 100],
                toggles: 5,
                warmup: 20,
                trial_timeout: Duration::from_secs(60),
            }
        } else {
            Sizes {
                seq: 5_000,
                conc: 20_000,
                in_flight: 64,
                spread_servers: 8,
                hydrate: vec![50, 200, 1_000],
                in_process: vec![10_000, 50_000],
                churn: 20_000,
                churn_in_flight: 64,
                churn_servers: 4,
                toggle: vec![100, 50_000],
                toggles: 50,
                warmup: 200,
                trial_timeout: Duration::from_secs(300),
            }
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    raise_fd_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(trial) = &args.trial {
        let spec: TrialSpec = serde_json::from_str(trial).context("--trial")?;
        let result = runtime.block_on(trial::run(spec));
        println!("{}", serde_json::to_string(&result)?);
        // Whatever the trial left behind (tasks, the runtime) dies with the process.
        std::process::exit(0);
    }
    runtime.block_on(orchestrate(args))
}

async fn orchestrate(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let sizes = Sizes::new(args.quick, args.large);
    let reps = args.reps.unwrap_or(if args.quick { 1 } else { 3 }).max(1);
    let root = Path::new(ROOT);
    let from_env = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let fixture = match args
        .fixture
        .clone()
        .or_else(|| from_env("PLURNK_BENCH_FIXTURE"))
    {
        Some(path) => path,
        None => default_fixture().await?,
    };
    if !fixture.is_file() {
        bail!("the fixture server {} does not exist", fixture.display());
    }
    let node = args
        .node
        .clone()
        .or_else(|| from_env("PLURNK_BENCH_NODE"))
        .unwrap_or_else(|| root.join(".cache/node22/node_modules/node/bin/node"));
    let ts_dir = args
        .ts_dir
        .clone()
        .or_else(|| from_env("PLURNK_BENCH_TS_DIR"))
        .unwrap_or_else(|| root.join(".cache/bench-npm"));
    let ts_installed = node.is_file()
        && ts_dir
            .join("node_modules/@modelcontextprotocol/client")
            .is_dir();
    let mut clients: Vec<Client> = if args.clients.is_empty() {
        Client::ALL.to_vec()
    } else {
        args.clients
            .iter()
            .map(|name| Client::parse(name).with_context(|| format!("unknown client {name:?}")))
            .collect::<anyhow::Result<_>>()?
    };
    let mut skipped = Vec::new();
    if !ts_installed && clients.contains(&Client::Ts) {
        clients.retain(|client| *client != Client::Ts);
        skipped.push(format!(
            "ts: Node 22 or @modelcontextprotocol/client missing ({} / {}); scripts/bench.sh installs them",
            node.display(),
            ts_dir.display()
        ));
        eprintln!("load: skipping the TypeScript client: {}", skipped[0]);
    }
    let groups = plan(&sizes, &args.only, &clients);
    // The live OTLP receiver of the export comparison, in this process (not the trial's).
    let receiver = if groups.iter().any(|group| group.id == report::OTEL_GROUP) {
        Some(otel::Receiver::start().await?)
    } else {
        None
    };
    let base = TrialSpec {
        client: Client::Host,
        workload: Workload::InProcess { servers: 0 },
        fixture,
        node,
        ts_dir,
        ts_driver: root.join("bench/ts-client.cjs"),
        otlp: receiver.as_ref().map(|receiver| receiver.url.clone()),
    };
    let total: usize = groups.iter().map(|g| g.clients.len() * reps).sum();
    let mut report = Report::new(args.quick, reps, skipped);
    let mut done = 0;
    // A trial that failed, or lost a call, makes the whole run fail (after the report is
    // written): a benchmark must not pass on figures it could not measure.
    let mut failed = Vec::new();
    for group in groups {
        let mut runs = report.begin(&group);
        for rep in 0..reps {
            // Rotate the order each repetition: nobody always goes first or last.
            let mut order = group.clients.clone();
            let len = order.len();
            order.rotate_left(rep % len.max(1));
            for client in order {
                done += 1;
                let spec = TrialSpec {
                    client,
                    workload: group.workload.clone(),
                    ..base.clone()
                };
                let result = run_trial(&spec, sizes.trial_timeout).await;
                eprintln!(
                    "load: [{done}/{total}] {} {} rep {}: {}",
                    group.id,
                    client.name(),
                    rep + 1,
                    report::summary(&group, &result)
                );
                if let Some(error) = &result.error {
                    failed.push(format!(
                        "{} {} rep {}: {error}",
                        group.id,
                        client.name(),
                        rep + 1
                    ));
                } else if result.metrics.get("lost").is_some_and(|lost| *lost > 0.0) {
                    failed.push(format!(
                        "{} {} rep {}: {} call(s) lost",
                        group.id,
                        client.name(),
                        rep + 1,
                        result.metrics["lost"]
                    ));
                }
                runs.push(client, result);
            }
        }
        report.finish(runs);
    }
    if let Some(receiver) = &receiver {
        let (requests, bytes) = receiver.received();
        eprintln!("load: the OTLP receiver got {requests} export request(s), {bytes} bytes");
        if requests == 0 {
            failed.push("seq-otel: the live receiver got nothing: export did not happen".into());
        }
    }
    let elapsed = started.elapsed();
    print!("{}", report.table(elapsed));
    let json_path = args.json.clone().unwrap_or_else(|| {
        root.join(if args.quick {
            "target/bench/load-quick.json"
        } else {
            "target/bench/load.json"
        })
    });
    if let Some(dir) = json_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(
        &json_path,
        serde_json::to_string_pretty(&report.json(elapsed))?,
    )?;
    eprintln!("load: wrote {}", json_path.display());
    if !failed.is_empty() {
        for failure in &failed {
            eprintln!("load: FAILED {failure}");
        }
        bail!("{} of {total} trial(s) failed", failed.len());
    }
    Ok(())
}

/// The workloads of one run, each with the clients that take part.
fn plan(sizes: &Sizes, only: &[String], clients: &[Client]) -> Vec<Group> {
    let wanted = |id: &str| only.is_empty() || only.iter().any(|o| o == id);
    let with = |list: &[Client]| -> Vec<Client> {
        list.iter()
            .copied()
            .filter(|c| clients.contains(c))
            .collect()
    };
    let all = with(&Client::ALL);
    let mut groups = Vec::new();
    // Only when asked for by name (`--only seq-otel`): the export needs feature `otel`, and
    // its rows are a comparison of the host with itself, apart from the Results table.
    if only.iter().any(|o| o == report::OTEL_GROUP) && clients.contains(&Client::Host) {
        groups.push(Group::new(
            report::OTEL_GROUP,
            format!("{} sequential echo calls, 1 server", sizes.seq),
            Workload::Calls {
                n: sizes.seq,
                c: 1,
                servers: 1,
                warmup: sizes.warmup,
                host_identity: false,
            },
            vec![Client::Host, Client::HostOtel, Client::HostOtelDown],
            &["p50_us", "p99_us", "cpu_us_per_call", "spans_dropped"],
        ));
    }
    if wanted("seq") {
        groups.push(Group::new(
            "seq",
            format!("{} sequential echo calls, 1 server", sizes.seq),
            Workload::Calls {
                n: sizes.seq,
                c: 1,
                servers: 1,
                warmup: sizes.warmup,
                host_identity: false,
            },
            all.clone(),
            &[
                "p50_us",
                "p99_us",
                "calls_per_s",
                "cpu_us_per_call",
                "switches_per_call",
            ],
        ));
        // What share of the gap is rmcp's own per-request `_meta`: raw rmcp advertising what
        // the host advertises (its client identity, elicitation and the Tasks extension).
        groups.push(Group::new(
            "seq-identity",
            format!(
                "{} sequential echo calls, 1 server, raw rmcp advertising the host's client identity and capabilities",
                sizes.seq
            ),
            Workload::Calls {
                n: sizes.seq,
                c: 1,
                servers: 1,
                warmup: sizes.warmup,
                host_identity: true,
            },
            with(&[Client::Host, Client::Rmcp]),
            &["p50_us", "p99_us", "cpu_us_per_call"],
        ));
    }
    if wanted("conc") {
        groups.push(Group::new(
            "conc",
            format!(
                "{} calls, {} in flight, 1 server",
                sizes.conc, sizes.in_flight
            ),
            Workload::Calls {
                n: sizes.conc,
                c: sizes.in_flight,
                servers: 1,
                warmup: sizes.warmup,
                host_identity: false,
            },
            all.clone(),
            &[
                "calls_per_s",
                "p99_us",
                "cpu_us_per_call",
                "switches_per_call",
            ],
        ));
    }
    if wanted("spread") {
        groups.push(Group::new(
            "spread",
            format!(
                "{} calls, {} in flight, over {} servers",
                sizes.conc, sizes.in_flight, sizes.spread_servers
            ),
            Workload::Calls {
                n: sizes.conc,
                c: sizes.in_flight,
                servers: sizes.spread_servers,
                warmup: sizes.warmup,
                host_identity: false,
            },
            all.clone(),
            &["calls_per_s", "p99_us"],
        ));
    }
    if wanted("hydrate") {
        for &servers in &sizes.hydrate {
            groups.push(Group::new(
                &format!("hydrate-{servers}"),
                format!("{servers} stdio servers spawned, negotiated, tools listed"),
                Workload::Hydrate {
                    servers,
                    ts_mode: None,
                },
                all.clone(),
                &[
                    "ready_ms",
                    "per_attachment_kib",
                    "per_attachment_settled_kib",
                    "anon_per_attachment_settled_kib",
                    "heap_per_attachment_kib",
                    "peak_kib",
                ],
            ));
        }
        // The TypeScript SDK's auto negotiation probes on a sibling process; this row shows
        // what its in-place probe (a StdioClientTransport subclass) costs instead.
        let servers = sizes.hydrate[sizes.hydrate.len() / 2];
        if clients.contains(&Client::Ts) {
            groups.push(Group::new(
                &format!("hydrate-{servers}-ts-inplace"),
                format!("{servers} stdio servers, TS probing in place (no sibling)"),
                Workload::Hydrate {
                    servers,
                    ts_mode: Some("inplace".into()),
                },
                vec![Client::Ts],
                &["ready_ms", "per_attachment_kib"],
            ));
        }
    }
    if wanted("inproc") {
        for &servers in &sizes.in_process {
            groups.push(Group::new(
                &format!("inproc-{servers}"),
                format!("{servers} in-process servers over tokio::io::duplex, no processes"),
                Workload::InProcess { servers },
                with(&[Client::Host, Client::Rmcp, Client::Bare]),
                &[
                    "ready_ms",
                    "cpu_ms",
                    "per_attachment_kib",
                    "per_attachment_settled_kib",
                    "anon_per_attachment_settled_kib",
                    "heap_per_attachment_kib",
                    "peak_kib",
                    "commits",
                ],
            ));
        }
    }
    if wanted("churn") {
        groups.push(Group::new(
            "churn",
            format!(
                "{} calls, {} in flight over {} servers, disable/enable in turn",
                sizes.churn, sizes.churn_in_flight, sizes.churn_servers
            ),
            Workload::Churn {
                n: sizes.churn,
                c: sizes.churn_in_flight,
                servers: sizes.churn_servers,
            },
            with(&[Client::Host, Client::Rmcp]),
            &[
                "ok",
                "failed",
                "lost",
                "calls_per_s",
                "commit_p50_ms",
                "commit_p99_ms",
                "cycles",
            ],
        ));
    }
    if wanted("toggle") {
        for &servers in &sizes.toggle {
            groups.push(Group::new(
                &format!("toggle-{servers}"),
                format!(
                    "one of {servers} in-process servers disabled and enabled again, {} times",
                    sizes.toggles
                ),
                Workload::Toggle {
                    servers,
                    toggles: sizes.toggles,
                },
                with(&[Client::Host, Client::Rmcp]),
                &[
                    "commit_p50_ms",
                    "commit_p99_ms",
                    "disable_p50_ms",
                    "enable_p50_ms",
                ],
            ));
        }
    }
    groups.retain(|group| !group.clients.is_empty());
    groups
}

/// Runs one trial in a fresh child process of this binary.
async fn run_trial(spec: &TrialSpec, timeout: Duration) -> TrialResult {
    let attempt = async {
        let exe = std::env::current_exe()?;
        let mut child = tokio::process::Command::new(exe)
            .arg("--trial")
            .arg(serde_json::to_string(spec)?)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdout = child.stdout.take().context("no stdout")?;
        let mut output = String::new();
        let read = tokio::time::timeout(timeout, stdout.read_to_string(&mut output)).await;
        if read.is_err() {
            let _ = child.kill().await;
            bail!("timed out after {} s", timeout.as_secs());
        }
        let status = child.wait().await?;
        let line = output.lines().last().unwrap_or_default();
        serde_json::from_str::<TrialResult>(line)
            .with_context(|| format!("the trial ({status}) printed no result: {output:?}"))
    };
    attempt
        .await
        .unwrap_or_else(|error| TrialResult::failed(format!("{error:#}")))
}

/// `plurnk-mcp-fixture` next to this build (…/target/<profile>/), built when missing.
async fn default_fixture() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    // …/target/<profile>/examples/load → …/target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("cannot place this executable")?
        .to_owned();
    let fixture = profile_dir.join("plurnk-mcp-fixture");
    if !fixture.is_file() {
        let release = profile_dir
            .file_name()
            .is_some_and(|name| name == "release");
        eprintln!(
            "load: building the fixture server (cargo build -p plurnk-mcp-fixture{})",
            if release { " --release" } else { "" }
        );
        let mut cargo = tokio::process::Command::new(
            std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
        );
        cargo
            .args(["build", "-p", "plurnk-mcp-fixture"])
            .current_dir(ROOT);
        if release {
            cargo.arg("--release");
        }
        let status = cargo.status().await?;
        if !status.success() {
            bail!("building the fixture server failed ({status})");
        }
    }
    Ok(fixture)
}

/// Hydrating 1,000 stdio servers holds a few thousand pipe ends: lift the soft limit.
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct we hand them.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
