//! More than one host on one PostgreSQL, for real: the store's suite against a server this
//! binary starts itself (`initdb`, `pg_ctl`), two hosts that follow each other's changes
//! (conflicts, the convergence benchmark, PostgreSQL stopped under load, one host cut off), and
//! three `plurnk-mcp serve` replicas behind HAProxy under the Python SDK's clients, one of them
//! killed and started again.
//!
//! Its own harness (`harness = false`): PostgreSQL is started once for the whole binary and
//! stopped at its end, which libtest has no place for. `cargo test --test replicas -- NAME`
//! runs the cases whose name contains NAME. The last line is libtest's summary.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use plurnk_mcp::config::McpServerOptions;
use plurnk_mcp::store::suite::{self, Harness};
use plurnk_mcp::store::{PostgresStore, Store, StoreError};
use plurnk_mcp::{
    CallOptions, Customize, Host, HostConfig, HostOptions, ServerDefinition, ServerState,
    Workspace, WorkspaceSnapshot,
};
use serde_json::json;

#[path = "support/env.rs"]
mod env;
#[path = "support/peers.rs"]
mod peers;
#[path = "support/postgres.rs"]
mod postgres;
#[path = "support/wait.rs"]
mod wait;

use env::EXE;
use postgres::{PASSWORD, Postgres};

/// One case: a name and what it runs against the server.
type Case = (
    String,
    Box<dyn Fn(Arc<Bench>) -> Pin<Box<dyn Future<Output = ()>>>>,
);

/// What every case shares: the server, and a counter for fresh database names.
struct Bench {
    pg: Postgres,
    next: AtomicUsize,
}

impl Bench {
    /// A fresh, empty database and its URL.
    fn database(&self) -> String {
        let name = format!("case_{}", self.next.fetch_add(1, Ordering::SeqCst));
        self.pg.create_database(&name);
        self.pg.url(&name)
    }
}

fn main() -> std::process::ExitCode {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let mut cases: Vec<Case> = Vec::new();
    for name in suite::CASES {
        cases.push((
            format!("postgres_store::{name}"),
            Box::new(move |bench| Box::pin(store_case(bench, name))),
        ));
    }
    macro_rules! case {
        ($($name:ident),* $(,)?) => {
            $( cases.push((stringify!($name).to_owned(), Box::new(|bench| Box::pin($name(bench))))); )*
        };
    }
    case!(
        a_database_of_another_program_is_refused_and_untouched,
        a_newer_schema_is_refused_and_untouched,
        hosts_starting_at_once_migrate_once,
        the_password_never_shows,
        a_postgres_url_without_the_feature_is_refused_naming_it,
        conflicting_changes_lose_nothing_and_the_later_writer_gets_409,
        every_kind_of_change_reaches_the_other_host,
        a_closed_gate_holds_what_another_replica_added,
        benchmark_200_changes_reach_the_other_host,
        postgres_stopped_under_load_loses_no_call_and_nothing_made_meanwhile,
        a_password_from_the_password_file_reaches_the_store_and_nowhere_else,
        a_replica_cut_off_from_its_store_tells_only_the_bearer_why,
        a_session_ended_on_one_replica_is_404_on_every_other,
        gateway_replicas_behind_haproxy_survive_a_kill,
    );
    let chosen: Vec<Case> = cases
        .into_iter()
        .filter(|(name, _)| filter.is_empty() || filter.iter().any(|f| name.contains(f)))
        .collect();
    let started = Instant::now();
    println!("\nrunning {} tests", chosen.len());
    let bench = Arc::new(Bench {
        pg: Postgres::start(),
        next: AtomicUsize::new(0),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut failed = Vec::new();
    for (name, case) in &chosen {
        let began = Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(case(bench.clone()));
        }));
        let took = began.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => println!("test {name} ... ok ({took:.1} s)"),
            Err(_) => {
                println!("test {name} ... FAILED ({took:.1} s)");
                failed.push(name.clone());
            }
        }
    }
    drop(runtime);
    drop(bench);
    let passed = chosen.len() - failed.len();
    if !failed.is_empty() {
        println!("\nfailures:");
        for name in &failed {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; 0 filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(101)
    }
}

// === the store ===

/// A PostgreSQL store under the shared suite; its durable bytes are every row, versions
/// included, as the database holds them.
struct Pg {
    store: PostgresStore,
    bench: Arc<Bench>,
    database: String,
}

impl Harness for Pg {
    fn store(&self) -> &dyn Store {
        &self.store
    }
    fn durable_bytes(&self) -> Pin<Box<dyn Future<Output = Vec<u8>> + Send + '_>> {
        let rows = self.bench.pg.sql(
            &self.database,
            "SELECT 's', workspace, alias, source, definition FROM plurnk_mcp_server
             UNION ALL SELECT 'e', workspace, alias, enabled::text, '' FROM plurnk_mcp_enabledness
             UNION ALL SELECT 'v', workspace, alias, version::text, '' FROM plurnk_mcp_revision
             ORDER BY 1, 2, 3",
        );
        Box::pin(std::future::ready(rows.into_bytes()))
    }
}

async fn store_case(bench: Arc<Bench>, name: &'static str) {
    let url = bench.database();
    let database = url.rsplit('/').next().expect("a database").to_owned();
    let store = PostgresStore::connect(&url)
        .await
        .expect("the store connects");
    let harness = Pg {
        store,
        bench,
        database,
    };
    suite::run(name, &harness).await;
}

fn database_of(url: &str) -> String {
    url.rsplit('/').next().expect("a database").to_owned()
}

async fn a_database_of_another_program_is_refused_and_untouched(bench: Arc<Bench>) {
    let url = bench.database();
    let name = database_of(&url);
    bench.pg.sql(
        &name,
        "CREATE TABLE recipes (name text); INSERT INTO recipes VALUES ('soup')",
    );
    let before = bench.pg.sql(
        &name,
        "SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'public'",
    );
    let error = PostgresStore::connect(&url).await.expect_err("refused");
    assert!(matches!(error, StoreError::Refused { .. }), "{error:?}");
    let said = error.to_string();
    assert!(said.contains("holds tables of another program"), "{said}");
    assert!(!said.contains(PASSWORD), "{said}");
    let after = bench.pg.sql(
        &name,
        "SELECT string_agg(tablename, ',') FROM pg_tables WHERE schemaname = 'public'",
    );
    assert_eq!(before, after, "the database was changed");
}

async fn a_newer_schema_is_refused_and_untouched(bench: Arc<Bench>) {
    let url = bench.database();
    let name = database_of(&url);
    drop(
        PostgresStore::connect(&url)
            .await
            .expect("a new database is ours"),
    );
    bench
        .pg
        .sql(&name, "UPDATE plurnk_mcp_meta SET version = 99");
    let error = PostgresStore::connect(&url).await.expect_err("refused");
    assert!(
        matches!(
            error,
            StoreError::NewerDatabase {
                found: 99,
                supported: 2,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("run a newer plurnk-mcp"),
        "{error}"
    );
    assert_eq!(
        bench
            .pg
            .sql(&name, "SELECT version FROM plurnk_mcp_meta")
            .trim(),
        "99"
    );
}

async fn hosts_starting_at_once_migrate_once(bench: Arc<Bench>) {
    let url = bench.database();
    let opened = futures::future::join_all((0..6).map(|_| PostgresStore::connect(&url))).await;
    for store in &opened {
        assert!(store.is_ok(), "{store:?}");
    }
    let name = database_of(&url);
    assert_eq!(
        bench
            .pg
            .sql(&name, "SELECT count(*), max(version) FROM plurnk_mcp_meta")
            .trim(),
        "1|2"
    );
}

async fn the_password_never_shows(bench: Arc<Bench>) {
    let url = bench.database();
    let store = PostgresStore::connect(&url).await.expect("connects");
    let debug = format!("{store:?}");
    assert!(
        !debug.contains(PASSWORD) && debug.contains("plurnk@127.0.0.1"),
        "{debug}"
    );
    assert!(!store.name().contains(PASSWORD), "{}", store.name());
    let wrong = url.replace(PASSWORD, "not-the-password-at-all");
    let error = PostgresStore::connect(&wrong).await.expect_err("refused");
    for shown in [error.to_string(), format!("{error:?}")] {
        assert!(!shown.contains("not-the-password-at-all"), "{shown}");
        assert!(!shown.contains(PASSWORD), "{shown}");
    }
    // A server that is not there: unreachable, named, no password.
    let nowhere = format!(
        "postgres://plurnk:{PASSWORD}@127.0.0.1:{}/x",
        postgres::free_port()
    );
    let error = PostgresStore::connect(&nowhere)
        .await
        .expect_err("unreachable");
    assert!(matches!(error, StoreError::Unavailable { .. }), "{error:?}");
    assert!(!error.to_string().contains(PASSWORD), "{error}");
}

async fn a_postgres_url_without_the_feature_is_refused_naming_it(_: Arc<Bench>) {
    // This build has the feature; what a build without it says is the library's own words.
    let error = StoreError::FeatureOff {
        feature: "postgres",
        what: "a postgres:// state".into(),
    };
    assert!(
        error
            .to_string()
            .contains("needs the `postgres` feature of plurnk-mcp"),
        "{error}"
    );
    assert!(plurnk_mcp::store::is_postgres_url("PostgreSQL://h/db"));
    assert!(!plurnk_mcp::store::is_postgres_url(
        "/var/lib/postgres/state.sqlite"
    ));
}

// === two hosts ===

const WORKSPACE: &str = "team";

/// The configuration both hosts share: `svc` (changed by the tests) and `calm` (called
/// throughout, never changed), both the fixture over stdio, runtime adds allowed.
fn config() -> HostConfig {
    let mut pairs: Vec<(String, String)> = env::fixture("svc", &[]);
    pairs.extend(env::fixture("calm", &[]));
    pairs.push((
        "PLURNK_MCP_ENABLED".into(),
        json!(["svc", "calm"]).to_string(),
    ));
    pairs.push(("PLURNK_MCP_ALLOW_ADD".into(), "true".into()));
    pairs.push(("PLURNK_MCP_CONNECT_TIMEOUT".into(), "10000".into()));
    env::checked(pairs.into_iter().collect::<BTreeMap<_, _>>())
}

async fn host_on(url: &str) -> (Host, Workspace) {
    let store = PostgresStore::connect(url)
        .await
        .expect("the store connects");
    let options = HostOptions::default().with_store(Some(Arc::new(store)));
    let host = Host::start_with(config(), options)
        .await
        .expect("the host starts");
    let workspace = host
        .workspace(WORKSPACE)
        .await
        .expect("the workspace opens");
    (host, workspace)
}

fn state_of(snapshot: &WorkspaceSnapshot, alias: &str) -> Option<ServerState> {
    snapshot.server(alias).map(|server| server.state)
}

fn tools_of(snapshot: &WorkspaceSnapshot, alias: &str) -> Vec<String> {
    snapshot
        .server(alias)
        .map(|server| server.tools.iter().map(|tool| tool.name.clone()).collect())
        .unwrap_or_default()
}

async fn settled(workspace: &Workspace, what: &str, check: impl Fn(&WorkspaceSnapshot) -> bool) {
    let snapshot = workspace.wait_for(wait::BOUND, &check).await;
    assert!(
        check(&snapshot),
        "{what}: {:?}",
        snapshot
            .servers
            .aliases()
            .map(|a| (a, state_of(&snapshot, a)))
            .collect::<Vec<_>>()
    );
}

fn only_echo() -> Customize {
    let options = json!({"tools": ["echo"]}).to_string();
    Customize::default().with_options(Some(
        McpServerOptions::from_json(&options).expect("options"),
    ))
}

/// The fixture added as `alias`, with `tools` enabled (all when `None`).
fn added(alias: &str, tools: Option<&str>) -> ServerDefinition {
    let mut options = json!({"args": ["fixture", "--name", alias]});
    if let Some(tool) = tools {
        options["tools"] = json!([tool]);
    }
    let options = McpServerOptions::from_json(&options.to_string()).expect("options");
    ServerDefinition::from_target(alias, EXE)
        .and_then(|definition| definition.with_options(&options))
        .expect("a valid definition")
}

async fn conflicting_changes_lose_nothing_and_the_later_writer_gets_409(bench: Arc<Bench>) {
    let url = bench.database();
    let (a, on_a) = host_on(&url).await;
    let (b, on_b) = host_on(&url).await;
    for workspace in [&on_a, &on_b] {
        settled(workspace, "svc ready", |s| {
            state_of(s, "svc") == Some(ServerState::Ready)
        })
        .await;
    }

    // 1. B decides from what it saw, A changes the server before B's change is written: B is
    // held busy, its disable waits behind, A customizes; then B's disable meets A's write.
    let (release, held) = tokio::sync::oneshot::channel::<()>();
    assert!(on_b.stall_for_test(held).await);
    let disabling = tokio::spawn({
        let on_b = on_b.clone();
        async move { on_b.disable("svc").await }
    });
    // The pause is the scenario: the disable reaches B's mailbox, behind the stall, before A
    // writes (B's mailbox length is not observable from here; B stays stalled either way).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let customized = on_a
        .enable_with("svc", only_echo())
        .await
        .expect("A's change");
    assert_eq!(customized.state, ServerState::Ready);
    drop(release);
    let refused = disabling
        .await
        .expect("joined")
        .expect_err("the later writer is refused");
    assert_eq!(
        (refused.status, refused.kind.as_str()),
        (409, "conflict"),
        "{refused:?}"
    );
    assert!(
        refused.detail.contains("changed by another host meanwhile")
            && refused
                .detail
                .contains("the store now holds it specialized in this workspace (enabled"),
        "{}",
        refused.detail
    );
    // Nothing lost: A's change stands, and B follows it.
    for workspace in [&on_a, &on_b] {
        settled(workspace, "A's change everywhere", |s| {
            state_of(s, "svc") == Some(ServerState::Ready) && tools_of(s, "svc") == ["echo"]
        })
        .await;
    }

    // 2. Both add one alias at the same moment: one is added everywhere, the other told.
    let (first, second) = tokio::join!(
        on_a.add(added("extra", Some("echo"))),
        on_b.add(added("extra", Some("add"))),
    );
    let outcomes = [first.as_ref().map(|_| ()), second.as_ref().map(|_| ())];
    let won: Vec<usize> = (0..2).filter(|i| outcomes[*i].is_ok()).collect();
    assert_eq!(won.len(), 1, "exactly one add wins: {first:?} / {second:?}");
    let lost = if won[0] == 0 { &second } else { &first };
    let problem = lost.as_ref().expect_err("the other is refused");
    assert_eq!(problem.status, 409, "{problem:?}");
    let winner = if won[0] == 0 { "echo" } else { "add" };
    for workspace in [&on_a, &on_b] {
        settled(workspace, "the winning add everywhere", |s| {
            state_of(s, "extra") == Some(ServerState::Ready) && tools_of(s, "extra") == [winner]
        })
        .await;
    }
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
}

/// What shows that a change arrived.
type Reached = Box<dyn Fn(&WorkspaceSnapshot) -> bool>;

async fn every_kind_of_change_reaches_the_other_host(bench: Arc<Bench>) {
    let url = bench.database();
    let (a, on_a) = host_on(&url).await;
    let (b, on_b) = host_on(&url).await;
    let steps: Vec<(&str, Reached)> = vec![
        (
            "disable",
            Box::new(|s| state_of(s, "svc") == Some(ServerState::Disabled)),
        ),
        (
            "enable",
            Box::new(|s| {
                state_of(s, "svc") == Some(ServerState::Ready) && tools_of(s, "svc").len() > 1
            }),
        ),
        ("customize", Box::new(|s| tools_of(s, "svc") == ["echo"])),
        (
            "remove",
            Box::new(|s| {
                state_of(s, "svc") == Some(ServerState::Disabled) && tools_of(s, "svc").is_empty()
            }),
        ),
        (
            "add",
            Box::new(|s| state_of(s, "extra") == Some(ServerState::Ready)),
        ),
        ("remove added", Box::new(|s| s.server("extra").is_none())),
    ];
    for (kind, reached) in steps {
        match kind {
            "disable" => drop(on_a.disable("svc").await.expect(kind)),
            "enable" => drop(on_a.enable("svc").await.expect(kind)),
            "customize" => drop(on_a.enable_with("svc", only_echo()).await.expect(kind)),
            "remove" => drop(on_a.remove("svc").await.expect(kind)),
            "add" => drop(on_a.add(added("extra", None)).await.expect(kind)),
            _ => drop(on_a.remove("extra").await.expect(kind)),
        }
        settled(&on_a, kind, &reached).await;
        settled(&on_b, &format!("{kind} reaches B"), &reached).await;
    }
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
}

/// Replica A lets workspaces add servers, replica B has its install gate closed: what A adds
/// reaches B enabled and held by B's gate (`403 install-gate-closed`), not shown disabled.
async fn a_closed_gate_holds_what_another_replica_added(bench: Arc<Bench>) {
    let url = bench.database();
    let (a, on_a) = host_on(&url).await;
    let store = PostgresStore::connect(&url)
        .await
        .expect("the store connects");
    let mut pairs: Vec<(String, String)> = env::fixture("svc", &[]);
    pairs.extend(env::fixture("calm", &[]));
    pairs.push((
        "PLURNK_MCP_ENABLED".into(),
        json!(["svc", "calm"]).to_string(),
    ));
    let closed = env::checked(pairs.into_iter().collect::<BTreeMap<_, _>>());
    let b = Host::start_with(
        closed,
        HostOptions::default().with_store(Some(Arc::new(store))),
    )
    .await
    .expect("the host starts");
    let on_b = b.workspace(WORKSPACE).await.expect("the workspace opens");
    drop(on_a.add(added("extra", None)).await.expect("add"));
    settled(&on_a, "added on A", |s| {
        state_of(s, "extra") == Some(ServerState::Ready)
    })
    .await;
    settled(&on_b, "held by B's gate", |s| {
        s.server("extra").is_some_and(|server| {
            server.state == ServerState::Unavailable
                && server
                    .problem
                    .as_ref()
                    .is_some_and(|problem| problem.kind == "install-gate-closed")
        })
    })
    .await;
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
}

/// Nearest-rank percentile of sorted `values`.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn benchmark_200_changes_reach_the_other_host(bench: Arc<Bench>) {
    let url = bench.database();
    let (a, on_a) = host_on(&url).await;
    let (b, on_b) = host_on(&url).await;
    let mut watch_b = on_b.watch();
    let mut lags = Vec::new();
    let (mut disables, mut enables) = (Vec::new(), Vec::new());
    for change in 0..200 {
        let (want, done) = if change % 2 == 0 {
            (ServerState::Disabled, on_a.disable("svc").await)
        } else {
            (ServerState::Ready, on_a.enable("svc").await)
        };
        // Timed from A's answer: the change is committed and durable on A.
        let committed = Instant::now();
        assert_eq!(done.expect("A's change").state, want);
        let mut seen = watch_b.current();
        while state_of(&seen, "svc") != Some(want) {
            seen = tokio::time::timeout(wait::BOUND, watch_b.changed())
                .await
                .expect("B follows within the bound")
                .expect("B's host runs");
        }
        let lag = committed.elapsed();
        lags.push(lag);
        if want == ServerState::Disabled {
            disables.push(lag)
        } else {
            enables.push(lag)
        }
    }
    let row = |name: &str, lags: &mut Vec<Duration>| {
        lags.sort();
        format!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} |",
            lags.len(),
            percentile(lags, 50.0).as_secs_f64() * 1000.0,
            percentile(lags, 99.0).as_secs_f64() * 1000.0,
            lags.last().map_or(0.0, |max| max.as_secs_f64() * 1000.0)
        )
    };
    println!("\nconvergence: a change on host A until host B's snapshot shows it (ms)");
    println!("| changes | n | p50 | p99 | max |\n|---|---|---|---|---|");
    println!("{}", row("disable (B drains, then commits)", &mut disables));
    println!(
        "{}",
        row("enable (B connects its own server)", &mut enables)
    );
    println!("{}", row("all", &mut lags));
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
}

/// A TCP forwarder between one host and PostgreSQL that can cut that host off (its
/// connections dropped, new ones refused) while the other reaches the server directly.
struct Cut {
    port: u16,
    open: Arc<AtomicBool>,
    cut: Arc<tokio::sync::Notify>,
}

impl Cut {
    async fn to(port: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let own = listener.local_addr().expect("bound").port();
        let open = Arc::new(AtomicBool::new(true));
        let cut = Arc::new(tokio::sync::Notify::new());
        tokio::spawn({
            let open = open.clone();
            let cut = cut.clone();
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        continue;
                    }
                    let cut = cut.clone();
                    tokio::spawn(async move {
                        let Ok(mut server) =
                            tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                        else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            () = cut.notified() => {}
                        }
                    });
                }
            }
        });
        Self {
            port: own,
            open,
            cut,
        }
    }

    fn set(&self, open: bool) {
        self.open.store(open, Ordering::SeqCst);
        if !open {
            self.cut.notify_waiters();
        }
    }
}

/// Calls `calm` on `workspace` one after another until `stop`; (ok, failed, hung).
async fn call_loop(workspace: Workspace, stop: Arc<AtomicBool>) -> (usize, Vec<String>, usize) {
    let (mut ok, mut failed, mut hung) = (0, Vec::new(), 0);
    while !stop.load(Ordering::SeqCst) {
        let call =
            workspace.call_tool("calm", "echo", json!({"text": "x"}), CallOptions::default());
        match tokio::time::timeout(Duration::from_secs(10), call).await {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(error)) => failed.push(error.to_string()),
            Err(_) => hung += 1,
        }
    }
    (ok, failed, hung)
}

async fn postgres_stopped_under_load_loses_no_call_and_nothing_made_meanwhile(bench: Arc<Bench>) {
    let url = bench.database();
    let cut = Cut::to(bench.pg.port).await;
    let url_b = url.replace(&format!(":{}/", bench.pg.port), &format!(":{}/", cut.port));
    let (a, on_a) = host_on(&url).await;
    let (b, on_b) = host_on(&url_b).await;
    for workspace in [&on_a, &on_b] {
        settled(workspace, "calm ready", |s| {
            state_of(s, "calm") == Some(ServerState::Ready)
        })
        .await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let loops: Vec<_> = [&on_a, &on_a, &on_b, &on_b]
        .into_iter()
        .map(|workspace| tokio::spawn(call_loop(workspace.clone(), stop.clone())))
        .collect();

    // PostgreSQL dies as a crash would: both hosts see it, calls go on, actions are refused.
    bench.pg.down("immediate");
    for workspace in [&on_a, &on_b] {
        assert!(
            wait::until(wait::BOUND, || workspace.readiness().is_err()).await,
            "the host never noticed PostgreSQL went"
        );
    }
    for workspace in [&on_a, &on_b] {
        let refused = workspace
            .disable("svc")
            .await
            .expect_err("refused while the store is down");
        assert_eq!(
            (refused.status, refused.kind.as_str()),
            (503, "state-unavailable"),
            "{refused:?}"
        );
        assert!(
            refused
                .detail
                .contains("PostgreSQL postgres://plurnk@127.0.0.1"),
            "{}",
            refused.detail
        );
        assert!(!refused.detail.contains(PASSWORD), "{}", refused.detail);
        assert_eq!(
            state_of(&workspace.snapshot(), "svc"),
            Some(ServerState::Ready)
        );
    }
    // The pause is the scenario: the store stays down a while before it comes back.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // It comes back: both hosts are ready again; a change on A reaches B.
    bench.pg.up();
    for workspace in [&on_a, &on_b] {
        assert!(
            wait::until(wait::BOUND, || workspace.readiness().is_ok()).await,
            "the host never saw PostgreSQL back: {:?}",
            workspace.readiness()
        );
    }
    on_a.disable("svc")
        .await
        .expect("a change after the return");
    settled(&on_b, "the change after the return reaches B", |s| {
        state_of(s, "svc") == Some(ServerState::Disabled)
    })
    .await;

    // B alone is cut off; A changes the server meanwhile; B catches up once back.
    cut.set(false);
    assert!(
        wait::until(wait::BOUND, || on_b.readiness().is_err()).await,
        "B never noticed"
    );
    on_a.enable_with("svc", only_echo())
        .await
        .expect("a change while B is cut off");
    // The pause is the scenario: a window in which B, cut off, must not learn of A's change.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        state_of(&on_b.snapshot(), "svc"),
        Some(ServerState::Disabled),
        "B cannot know yet"
    );
    cut.set(true);
    settled(
        &on_b,
        "the change made while B was cut off reaches B",
        |s| state_of(s, "svc") == Some(ServerState::Ready) && tools_of(s, "svc") == ["echo"],
    )
    .await;

    stop.store(true, Ordering::SeqCst);
    let (mut ok, mut failed, mut hung) = (0, Vec::new(), 0);
    for handle in loops {
        let (o, f, h) = handle.await.expect("joined");
        ok += o;
        failed.extend(f);
        hung += h;
    }
    println!(
        "\ncalls on both hosts across the loss: {ok} ok, {} failed, {hung} hung",
        failed.len()
    );
    assert!(ok > 0, "no call ran");
    assert_eq!((failed.len(), hung), (0, 0), "calls failed: {failed:?}");
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
}

// === what a replica tells, keeps and ends ===

async fn a_password_from_the_password_file_reaches_the_store_and_nowhere_else(bench: Arc<Bench>) {
    use std::os::unix::fs::PermissionsExt;
    let url = bench.database();
    let bare = url.replace(&format!(":{PASSWORD}@"), "@");
    assert!(!bare.contains(PASSWORD), "{bare}");
    let name = bare.rsplit('/').next().expect("a database");
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pgpass-{}-{name}", std::process::id()));
    std::fs::write(
        &file,
        format!(
            "# the replicas' database\n127.0.0.1:{}:{name}:plurnk:{PASSWORD}\n",
            bench.pg.port
        ),
    )
    .expect("the password file");
    let list = |mode: u32| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
        std::process::Command::new(EXE)
            .args(["--state", &bare, "list"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PGPASSFILE", &file)
            .output()
            .expect("plurnk-mcp runs")
    };
    let listed = list(0o600);
    let said = String::from_utf8_lossy(&listed.stderr).into_owned();
    assert!(listed.status.success(), "{said}");
    assert!(!said.contains("warning"), "no password in argv: {said}");
    // A file others can read is not trusted: refused, saying what to do.
    let refused = list(0o644);
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success());
    assert!(said.contains("chmod 600"), "{said}");
    assert!(!said.contains(PASSWORD), "{said}");
    let _ = std::fs::remove_file(&file);
}

async fn a_replica_cut_off_from_its_store_tells_only_the_bearer_why(bench: Arc<Bench>) {
    const BEARER: &str = "replica-bearer-token-0123456789abcdef";
    let url = bench.database();
    let cut = Cut::to(bench.pg.port).await;
    let through = url.replace(&format!(":{}/", bench.pg.port), &format!(":{}/", cut.port));
    let port = postgres::free_port();
    let _replica = Replica::start_with(
        &through,
        port,
        &["--bearer-env", "REPLICA_BEARER"],
        &[("REPLICA_BEARER", BEARER)],
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a client");
    let readyz = format!("http://127.0.0.1:{port}/readyz");
    let ask = |bearer: bool, host: Option<&str>| {
        let mut request = http.get(&readyz);
        if bearer {
            request = request.bearer_auth(BEARER);
        }
        if let Some(host) = host {
            request = request.header("Host", host);
        }
        async move {
            match request.send().await {
                Ok(answer) => (
                    answer.status().as_u16(),
                    answer.text().await.unwrap_or_default(),
                ),
                Err(_) => (0, String::new()),
            }
        }
    };
    assert!(
        wait::until_async(Duration::from_secs(60), || async {
            ask(false, None).await.0 == 200
        })
        .await,
        "the replica never became ready"
    );
    cut.set(false);
    assert!(
        wait::until_async(wait::BOUND, || async { ask(false, None).await.0 == 503 }).await,
        "the replica never noticed its store was gone"
    );
    // Anyone: not ready, and nothing of the store.
    assert_eq!(ask(false, None).await, (503, "not ready\n".to_owned()));
    // The bearer: why, the store named without its password.
    let (status, why) = ask(true, None).await;
    assert_eq!(status, 503, "{why}");
    assert!(
        why.contains("not ready: the state store PostgreSQL postgres://plurnk@127.0.0.1"),
        "{why}"
    );
    assert!(!why.contains(PASSWORD), "{why}");
    // A page rebound to the replica's address: refused before anything is said.
    assert_eq!(ask(false, Some("evil.example")).await.0, 403);
    cut.set(true);
}

/// A 2025-11-25 request in session `id` (none for `initialize`) to the replica on `port`:
/// its status and the session id it answers with.
async fn legacy(
    http: &reqwest::Client,
    port: u16,
    id: Option<&str>,
    body: serde_json::Value,
) -> (u16, Option<String>) {
    let mut request = http
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&body);
    if let Some(id) = id {
        request = request.header("Mcp-Session-Id", id);
    }
    match request.send().await {
        Ok(answer) => {
            let id = answer
                .headers()
                .get("mcp-session-id")
                .and_then(|id| id.to_str().ok())
                .map(str::to_owned);
            let status = answer.status().as_u16();
            let _ = answer.bytes().await;
            (status, id)
        }
        Err(_) => (0, None),
    }
}

async fn a_session_ended_on_one_replica_is_404_on_every_other(bench: Arc<Bench>) {
    let url = bench.database();
    let ports: Vec<u16> = (0..3).map(|_| postgres::free_port()).collect();
    let _replicas: Vec<Replica> = ports
        .iter()
        .map(|port| Replica::start(&url, *port))
        .collect();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a client");
    for port in &ports {
        let ready = wait::until_async(Duration::from_secs(60), || {
            let http = http.clone();
            async move {
                http.get(format!("http://127.0.0.1:{port}/readyz"))
                    .send()
                    .await
                    .is_ok_and(|answer| answer.status() == 200)
            }
        })
        .await;
        assert!(ready, "replica on {port} never became ready");
    }
    let [a, b, c] = [ports[0], ports[1], ports[2]];
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "replicas", "version": "1"}}});
    let (status, id) = legacy(&http, a, None, initialize).await;
    assert_eq!(status, 200);
    let id = id.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(legacy(&http, a, Some(&id), initialized).await.0, 202);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    // B opens the sealed id and serves the session too.
    assert_eq!(legacy(&http, b, Some(&id), list.clone()).await.0, 200);
    // The client ends it on A.
    let deleted = http
        .delete(format!("http://127.0.0.1:{a}/mcp"))
        .header("Mcp-Session-Id", &id)
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .expect("DELETE");
    assert_eq!(deleted.status().as_u16(), 202);
    assert_eq!(legacy(&http, a, Some(&id), list.clone()).await.0, 404);
    // B, which held it, ends its copy once the store announces it.
    assert!(
        wait::until_async(wait::BOUND, || {
            let (http, id, list) = (http.clone(), id.clone(), list.clone());
            async move { legacy(&http, b, Some(&id), list).await.0 == 404 }
        })
        .await,
        "B still serves the session A ended"
    );
    // C, which never saw it, does not open it.
    assert_eq!(legacy(&http, c, Some(&id), list.clone()).await.0, 404);
    // Nor does a replica started after it ended, which heard no announcement: the store's
    // list says so.
    let late = postgres::free_port();
    let _late = Replica::start(&url, late);
    assert!(
        wait::until_async(Duration::from_secs(60), || {
            let http = http.clone();
            async move {
                http.get(format!("http://127.0.0.1:{late}/readyz"))
                    .send()
                    .await
                    .is_ok_and(|answer| answer.status() == 200)
            }
        })
        .await,
        "the late replica never became ready"
    );
    assert_eq!(legacy(&http, late, Some(&id), list).await.0, 404);
}

// === gateway replicas behind HAProxy ===

/// One `plurnk-mcp serve` replica, killed with its process group on drop.
struct Replica {
    child: std::process::Child,
}

impl Replica {
    fn start(url: &str, port: u16) -> Self {
        Self::start_with(url, port, &[], &[])
    }

    /// A replica with `extra` flags of `serve` and `vars` besides.
    fn start_with(url: &str, port: u16, extra: &[&str], vars: &[(&str, &str)]) -> Self {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(EXE);
        command
            .args([
                "--state",
                url,
                "--workspace",
                "default",
                "serve",
                "--transport",
                "http",
            ])
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--session-key-env",
                "REPLICA_SESSION_KEY",
            ])
            .args(extra)
            .envs(vars.iter().copied())
            .env(
                "REPLICA_SESSION_KEY",
                "replicas-share-this-session-key-0123456789",
            )
            .env("PLURNK_MCP_SVC", EXE)
            .env(
                "PLURNK_MCP_SVC_ARGS",
                json!(["fixture", "--name", "svc"]).to_string(),
            )
            .env("PLURNK_MCP_ENABLED", json!(["svc"]).to_string())
            .env("PLURNK_MCP_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0);
        let child = command.spawn().expect("a replica starts");
        Self { child }
    }

    fn kill(&mut self) {
        // SAFETY: signals to the process group this test started.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// HAProxy on `deploy/haproxy.cfg`, stopped on drop.
struct Balancer {
    child: std::process::Child,
    port: u16,
    stats: u16,
}

impl Balancer {
    fn start(replicas: &[u16]) -> Self {
        let port = postgres::free_port();
        let stats = postgres::free_port();
        let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/haproxy.cfg");
        let mut command = std::process::Command::new("haproxy");
        command
            .args(["-f", config, "-db"])
            .env("PLURNK_LB_LISTEN", format!("127.0.0.1:{port}"))
            .env("PLURNK_LB_STATS", format!("127.0.0.1:{stats}"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        for (i, replica) in replicas.iter().enumerate() {
            command.env(
                format!("PLURNK_REPLICA_{}", i + 1),
                format!("127.0.0.1:{replica}"),
            );
        }
        let child = command
            .spawn()
            .expect("haproxy starts (scripts/install-system.sh installs it)");
        Self { child, port, stats }
    }

    /// Per server: (status, requests sent to it so far), from the stats page.
    async fn servers(&self, http: &reqwest::Client) -> BTreeMap<String, (String, u64)> {
        let url = format!("http://127.0.0.1:{}/stats;csv", self.stats);
        let Ok(response) = http.get(url).send().await else {
            return BTreeMap::new();
        };
        let text = response.text().await.unwrap_or_default();
        let mut lines = text.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let column = |name: &str| header.iter().position(|h| *h == name);
        let (Some(px), Some(sv), Some(status), Some(total)) = (
            column("pxname"),
            column("svname"),
            column("status"),
            column("stot"),
        ) else {
            return BTreeMap::new();
        };
        lines
            .map(|line| line.split(',').collect::<Vec<_>>())
            .filter(|fields| {
                fields.get(px) == Some(&"replicas")
                    && fields.get(sv).is_some_and(|s| s.starts_with('r'))
            })
            .map(|fields| {
                (
                    fields[sv].to_owned(),
                    (
                        fields[status].to_owned(),
                        fields[total].parse().unwrap_or(0),
                    ),
                )
            })
            .collect()
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn gateway_replicas_behind_haproxy_survive_a_kill(bench: Arc<Bench>) {
    let url = bench.database();
    let ports: Vec<u16> = (0..3).map(|_| postgres::free_port()).collect();
    let mut replicas: Vec<Replica> = ports
        .iter()
        .map(|port| Replica::start(&url, *port))
        .collect();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a client");
    for port in &ports {
        let ready = wait::until_async(Duration::from_secs(60), || {
            let http = http.clone();
            async move {
                let answer = http
                    .get(format!("http://127.0.0.1:{port}/readyz"))
                    .send()
                    .await;
                answer.is_ok_and(|answer| answer.status() == 200)
            }
        })
        .await;
        assert!(ready, "replica on {port} never became ready");
    }
    let balancer = Balancer::start(&ports);
    let lb = format!("http://127.0.0.1:{}/mcp", balancer.port);
    let all_up = wait::until_async(wait::BOUND, || {
        let (balancer, http) = (&balancer, &http);
        async move {
            let servers = balancer.servers(http).await;
            servers.len() == 3 && servers.values().all(|(status, _)| status == "UP")
        }
    })
    .await;
    assert!(
        all_up,
        "the balancer never saw the replicas up: {:?}",
        balancer.servers(&http).await
    );

    // The load: the SDK's clients of both revisions for 60 s; r2 killed at 20 s, back at 40 s.
    let seconds = 60.0;
    let began = std::time::SystemTime::now();
    let driver = std::process::Command::new(&peers::peers().python)
        .arg(peers::peer_script("balancer_load.py"))
        .args([&lb, "svc_echo", &seconds.to_string(), "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("the load driver starts");
    // The pauses are the scenario: the load's schedule (r2 killed at 20 s, back at 40 s).
    tokio::time::sleep(Duration::from_secs(20)).await;
    let before_kill = balancer.servers(&http).await;
    replicas[1].kill();
    let killed_at = wall(std::time::SystemTime::now());
    let down = wait::until_async(Duration::from_secs(5), || {
        let (balancer, http) = (&balancer, &http);
        async move {
            balancer
                .servers(http)
                .await
                .get("r2")
                .is_some_and(|(status, _)| status.starts_with("DOWN"))
        }
    })
    .await;
    let marked_down = wall(std::time::SystemTime::now());
    assert!(
        down,
        "the balancer kept r2 up: {:?}",
        balancer.servers(&http).await
    );
    let while_down = balancer.servers(&http).await;
    tokio::time::sleep(Duration::from_secs(38).saturating_sub(began.elapsed().unwrap_or_default()))
        .await;
    let still_down = balancer.servers(&http).await;
    tokio::time::sleep(Duration::from_secs(40).saturating_sub(began.elapsed().unwrap_or_default()))
        .await;
    replicas[1] = Replica::start(&url, ports[1]);
    let restarted_at = wall(std::time::SystemTime::now());
    let output = tokio::task::spawn_blocking(move || driver.wait_with_output())
        .await
        .expect("joined")
        .expect("the driver ran");
    let after = balancer.servers(&http).await;
    assert!(
        output.status.success(),
        "the load driver failed: {:?}",
        output.status
    );
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the driver's report is JSON");

    // Counts.
    let calls = report["calls"].as_array().expect("calls");
    let count = |revision: &str, outcome: &str| {
        calls
            .iter()
            .filter(|call| call[0] == revision && call[4] == outcome)
            .count()
    };
    let failures: Vec<&serde_json::Value> = calls.iter().filter(|call| call[4] != "ok").collect();
    let in_flight_at_kill = |call: &serde_json::Value| {
        call[2]
            .as_f64()
            .is_some_and(|start| start <= killed_at + 0.05)
            && call[3].as_f64().is_some_and(|end| end >= killed_at - 0.05)
    };
    let restarted_sent = after.get("r2").map_or(0, |(_, sent)| *sent)
        - still_down.get("r2").map_or(0, |(_, sent)| *sent);
    println!(
        "\ngateway replicas behind HAProxy, {seconds} s, r2 killed at 20 s and started at 40 s"
    );
    println!("| revision | ok | failed | hung |\n|---|---|---|---|");
    for revision in ["2025-11-25", "2026-07-28"] {
        println!(
            "| {revision} | {} | {} | {} |",
            count(revision, "ok"),
            count(revision, "error"),
            count(revision, "hung")
        );
    }
    println!(
        "r2 marked down {:.2} s after the kill; requests to r2: {} before the kill, {} while down, \
         {} after its restart; connect failures {}",
        marked_down - killed_at,
        before_kill.get("r2").map_or(0, |(_, sent)| *sent),
        still_down.get("r2").map_or(0, |(_, sent)| *sent)
            - while_down.get("r2").map_or(0, |(_, sent)| *sent),
        restarted_sent,
        report["connect_failures"]
    );
    for failure in &failures {
        println!("  failed: {failure}");
    }
    let _ = restarted_at;

    assert_eq!(report["connect_failures"], 0, "a client could not connect");
    assert_eq!(
        count("2025-11-25", "hung") + count("2026-07-28", "hung"),
        0,
        "calls hung"
    );
    assert!(
        count("2025-11-25", "ok") > 100 && count("2026-07-28", "ok") > 100,
        "too little load ran"
    );
    // Failures: only calls in flight when r2 was killed, at most one per client.
    assert!(
        failures.iter().all(|call| in_flight_at_kill(call)),
        "a failure outside the kill: {failures:?}"
    );
    assert!(
        failures.len() <= 8,
        "more failures than clients: {}",
        failures.len()
    );
    // The balancer sent nothing to r2 while it was down, and sends to it again.
    assert_eq!(
        still_down.get("r2").map(|(_, sent)| *sent),
        while_down.get("r2").map(|(_, sent)| *sent),
        "requests went to the killed replica"
    );
    assert!(
        restarted_sent > 0,
        "the restarted replica took no traffic: {after:?}"
    );
    // Legacy sessions carried on: each client kept the one session id it had. The Python
    // SDK ends a legacy client whose request in flight loses its connection (on the killed
    // replica) instead of failing that call alone; that call is counted among the failures
    // above, in flight at the kill, and only such a client may stop calling.
    for (client, ids) in report["sessions"].as_object().expect("sessions") {
        assert_eq!(
            ids.as_array().map(Vec::len),
            Some(1),
            "{client} initialized again: {ids}"
        );
        let ended_at_kill = failures.iter().any(|call| {
            call[1] == client.as_str()
                && call[5]
                    .as_str()
                    .is_some_and(|d| d.starts_with("client ended"))
        });
        if ended_at_kill {
            continue;
        }
        let after_kill = calls
            .iter()
            .filter(|call| call[1] == client.as_str() && call[4] == "ok")
            .filter(|call| {
                call[2]
                    .as_f64()
                    .is_some_and(|start| start > marked_down + 1.0)
            })
            .count();
        assert!(after_kill > 0, "{client} made no call after the kill");
    }

    // A forged or tampered id is refused by every replica, and so is a client's that ended
    // (the SDK's client ends its session when it closes); a live one is served by any.
    let ended = report["sessions"]
        .as_object()
        .and_then(|sessions| sessions.values().next())
        .and_then(|ids| ids[0].as_str())
        .expect("a legacy session id")
        .to_owned();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "replicas", "version": "1"}}});
    let (status, real) = legacy(&http, ports[0], None, initialize).await;
    assert_eq!(status, 200);
    let real = real.expect("a live session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        legacy(&http, ports[0], Some(&real), initialized).await.0,
        202
    );
    let mut tampered = real.clone().into_bytes();
    tampered[4] = if tampered[4] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ASCII");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    for port in &ports {
        let ask = |id: String| {
            http.post(format!("http://127.0.0.1:{port}/mcp"))
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "2025-11-25")
                .header("mcp-session-id", id)
                .json(&list)
                .send()
        };
        for forged in ["forged.session", &tampered, &ended] {
            let answer = ask(forged.to_owned()).await.expect("an answer");
            assert_eq!(answer.status(), 404, "replica {port} took session {forged}");
        }
        let answer = ask(real.clone()).await.expect("an answer");
        assert_eq!(
            answer.status(),
            200,
            "replica {port} refused a real session"
        );
    }
    drop(balancer);
    drop(replicas);
}

fn wall(time: std::time::SystemTime) -> f64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs_f64())
        .unwrap_or_default()
}
