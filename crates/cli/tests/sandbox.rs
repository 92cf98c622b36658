//! Least privilege, held by the kernel: a hostile server under the default policy fails at
//! every trespass while the host and the server beside it carry on; a grandchild that left its
//! session and its environment ends with its server and with a host killed by `SIGKILL`; the
//! servers people install from npm and PyPI work under the default; `require` refuses what a
//! machine lacks and `best-effort` says what holds. Real processes throughout: the fixture's
//! `trespass` mode, the zoo `scripts/install-peers.sh` installs, the `plurnk-mcp` binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use plurnk_mcp::sandbox::SandboxOptions;
use plurnk_mcp::{
    CallOptions, Host, HostOptions, SandboxPart, SandboxState, ServerState, Workspace,
};
use serde_json::{Value, json};

#[path = "support/env.rs"]
mod env;
#[path = "support/peers.rs"]
mod peers;
#[path = "support/processes.rs"]
mod processes;
#[path = "support/wait.rs"]
mod wait;
use env::EXE;

/// A fresh folder under `target/tmp/sandbox`, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("sandbox")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// The variables of a `trespass` server `alias` with `policy`, and a plain fixture `good`.
fn trespass_and_good(alias: &str, policy: Option<Value>) -> BTreeMap<String, String> {
    let upper = alias.to_ascii_uppercase();
    let mut map = BTreeMap::new();
    map.insert(format!("PLURNK_MCP_{upper}"), EXE.to_owned());
    map.insert(
        format!("PLURNK_MCP_{upper}_ARGS"),
        json!(["fixture", "--hostile", "trespass"]).to_string(),
    );
    if let Some(policy) = policy {
        map.insert(format!("PLURNK_MCP_{upper}_SANDBOX"), policy.to_string());
    }
    map.extend(env::fixture("good", &[]));
    map.insert(
        "PLURNK_MCP_ENABLED".into(),
        json!([alias, "good"]).to_string(),
    );
    map.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), "20000".into());
    map
}

/// The configuration of `map` with no sandbox policy but the built-in default's (the rest of
/// the suite runs under a policy that also opens the repository to its servers).
fn default_policy(map: BTreeMap<String, String>) -> plurnk_mcp::HostConfig {
    assert!(!map.contains_key("PLURNK_MCP_SANDBOX"));
    plurnk_mcp::HostConfig::from_env(map).unwrap_or_else(|errors| panic!("{errors}"))
}

/// What `try` answers for `attempt`.
async fn attempt(workspace: &Workspace, alias: &str, attempt: Value) -> String {
    let result = workspace
        .call_tool(alias, "try", attempt.clone(), CallOptions::default())
        .await
        .unwrap_or_else(|error| panic!("{attempt}: {error}"));
    result.text()
}

/// Both servers ready and `good` answering: the host carried on.
async fn carried_on(workspace: &Workspace, alias: &str, after: &str) {
    let snapshot = workspace.snapshot();
    for server in [alias, "good"] {
        assert_eq!(
            snapshot.server(server).map(|s| s.state),
            Some(ServerState::Ready),
            "after {after}: {server} is not ready"
        );
    }
    let echoed = workspace
        .call_tool(
            "good",
            "echo",
            json!({"text": after}),
            CallOptions::default(),
        )
        .await
        .expect("the good server answers");
    assert_eq!(echoed.text(), after);
}

/// The pids of processes whose command line is exactly `sleep <seconds>`.
fn sleeping(seconds: &str) -> Vec<i32> {
    let wanted = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| cmd == wanted.as_bytes())
                && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|stat| stat.contains(") Z "))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_server_under_the_default_policy_fails_at_every_trespass_while_the_host_carries_on()
 {
    let dir = scratch("trespass");
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("a home");
    let key = home.join(".ssh/id_ed25519");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----").expect("a planted key");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).expect("a state folder");
    let state_file = state.join("plurnk-mcp.db");
    std::fs::write(&state_file, "the host's state").expect("a state file");
    let outside = dir.join("outside.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    let address = listener.local_addr().expect("its address").to_string();

    // Every member the default's but the network, which the loopback attempt needs none of.
    let config = default_policy(trespass_and_good(
        "hostile",
        Some(json!({"network": "none"})),
    ));
    let options = HostOptions::default().with_sandbox(
        SandboxOptions::default()
            .with_home(Some(home.clone()))
            .with_protected(vec![state.clone()]),
    );
    let host = Host::start_with(config, options)
        .await
        .expect("host starts");
    let ws = host.default_workspace();
    carried_on(&ws, "hostile", "the start").await;
    let report = ws
        .snapshot()
        .server("hostile")
        .and_then(|server| server.sandbox.clone())
        .expect("a sandboxed server reports its sandbox");
    assert_eq!(report.state, SandboxState::Held, "{}", report.line());

    let denied = |said: &str, what: &str| {
        assert!(
            said.starts_with(&format!("{what}: denied")),
            "{what} was not denied: {said}"
        );
    };
    let attempts = [
        // A child of its own, which only seccomp keeps it from tracing, and the host.
        ("ptrace", json!({"attempt": "ptrace", "pid": 0})),
        (
            "ptrace",
            json!({"attempt": "ptrace", "pid": std::process::id()}),
        ),
        ("read", json!({"attempt": "read", "path": key})),
        ("read", json!({"attempt": "read", "path": state_file})),
        ("write", json!({"attempt": "write", "path": outside})),
        ("connect", json!({"attempt": "connect", "address": address})),
        ("files", json!({"attempt": "files", "count": 100_000})),
        (
            "processes",
            json!({"attempt": "processes", "count": 10_000}),
        ),
        ("memory", json!({"attempt": "memory", "bytes": 8u64 << 30})),
    ];
    for (what, arguments) in attempts {
        let said = attempt(&ws, "hostile", arguments.clone()).await;
        denied(&said, what);
        carried_on(&ws, "hostile", &said).await;
    }
    assert!(!outside.exists(), "the write outside left a file");
    // Bounded, not merely failing at once: each stopped at its limit.
    let files = attempt(
        &ws,
        "hostile",
        json!({"attempt": "files", "count": 100_000}),
    )
    .await;
    let opened: usize = files
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!((4000..=4096).contains(&opened), "{files}");
    let forked = attempt(
        &ws,
        "hostile",
        json!({"attempt": "processes", "count": 10_000}),
    )
    .await;
    let started: usize = forked
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .expect("a count");
    // RLIMIT_NPROC stops it at 512; under root, which the kernel exempts from it, the PID
    // namespace's pid_max does, at 512 once its pids have wrapped around and 812 before.
    assert!((400..=812).contains(&started), "{forked}");

    // A server that allocates past its memory limit dies of it, and its Problem says so.
    let aborted = ws
        .call_tool(
            "hostile",
            "try",
            json!({"attempt": "memory-abort", "bytes": 8u64 << 30}),
            CallOptions::default(),
        )
        .await;
    assert!(aborted.is_err(), "{aborted:?}");
    let said = wait::until(wait::BOUND, || {
        ws.snapshot()
            .server("hostile")
            .and_then(|server| server.problem.as_ref())
            .is_some_and(|problem| problem.detail.contains("killed: memory limit 1 GiB"))
    })
    .await;
    assert!(said, "{:?}", ws.snapshot().server("hostile"));
    let echoed = ws
        .call_tool(
            "good",
            "echo",
            json!({"text": "still"}),
            CallOptions::default(),
        )
        .await
        .expect("the good server answers");
    assert_eq!(echoed.text(), "still");
    let _ = host.shutdown().await;
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_that_left_its_session_and_environment_ends_with_its_server() {
    let seconds = format!("600.{}1", std::process::id());
    let config = default_policy(trespass_and_good("hostile", None));
    let host = Host::start(config).await.expect("host starts");
    let ws = host.default_workspace();
    carried_on(&ws, "hostile", "the start").await;
    let said = attempt(
        &ws,
        "hostile",
        json!({"attempt": "escape", "seconds": seconds}),
    )
    .await;
    assert_eq!(said, "escape: done");
    assert!(
        wait::until(wait::BOUND, || !sleeping(&seconds).is_empty()).await,
        "the grandchild never started"
    );
    // The server ends by itself (no close of the host's reaches the grandchild first).
    let ended = ws
        .call_tool(
            "hostile",
            "try",
            json!({"attempt": "exit"}),
            CallOptions::default(),
        )
        .await;
    assert!(ended.is_err(), "{ended:?}");
    let since = Instant::now();
    assert!(
        wait::until(Duration::from_secs(2), || sleeping(&seconds).is_empty()).await,
        "the grandchild outlived its server by {:?}: {:?}",
        since.elapsed(),
        sleeping(&seconds)
    );
    let _ = host.shutdown().await;
}

#[test]
fn a_grandchild_that_left_its_session_and_environment_ends_with_a_host_killed_by_sigkill() {
    let seconds = format!("600.{}2", std::process::id());
    let dir = scratch("sigkill");
    let mut map = trespass_and_good("hostile", None);
    map.insert(
        "PLURNK_MCP_HOSTILE_ENV".into(),
        json!({"TRESPASS_ESCAPE": seconds}).to_string(),
    );
    let mut command = std::process::Command::new(EXE);
    command
        .args(["--state", &dir.join("state.db").display().to_string()])
        .args(["status", "--watch"])
        .env_clear()
        .envs(&map)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Ok(path) = std::env::var("PATH") {
        command.env("PATH", path);
    }
    let mut cli = processes::Killed(command.spawn().expect("plurnk-mcp runs"));
    assert!(
        wait::until_blocking(wait::BOUND, || !sleeping(&seconds).is_empty()),
        "the grandchild never started"
    );
    cli.0.kill().expect("SIGKILL");
    let _ = cli.0.wait();
    let since = Instant::now();
    assert!(
        wait::until_blocking(Duration::from_secs(2), || sleeping(&seconds).is_empty()),
        "the grandchild outlived the host by {:?}: {:?}",
        since.elapsed(),
        sleeping(&seconds)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_refuses_what_the_machine_lacks_and_best_effort_says_what_holds() {
    let mut map = trespass_and_good(
        "strict",
        Some(json!({"mode": "require", "network": "none"})),
    );
    map.insert("PLURNK_MCP_LOOSE".into(), EXE.to_owned());
    map.insert(
        "PLURNK_MCP_LOOSE_ARGS".into(),
        json!(["fixture", "--hostile", "trespass"]).to_string(),
    );
    map.insert(
        "PLURNK_MCP_LOOSE_SANDBOX".into(),
        json!({"network": "none"}).to_string(),
    );
    map.insert(
        "PLURNK_MCP_ENABLED".into(),
        json!(["strict", "loose", "good"]).to_string(),
    );
    // A machine without network namespaces, as far as this host can tell.
    let options = HostOptions::default()
        .with_sandbox(SandboxOptions::default().pretending_missing(vec![SandboxPart::Network]));
    let host = Host::start_with(default_policy(map), options)
        .await
        .expect("host starts");
    let ws = host.default_workspace();
    let snapshot = ws.snapshot();
    let strict = snapshot.server("strict").expect("strict");
    assert_eq!(strict.state, ServerState::Unavailable);
    let detail = &strict.problem.as_ref().expect("a Problem").detail;
    assert!(
        detail.contains("its sandbox policy requires network")
            && detail.contains("taken as missing by a test lever"),
        "{detail}"
    );
    let loose = snapshot.server("loose").expect("loose");
    assert_eq!(loose.state, ServerState::Ready, "{:?}", loose.problem);
    let report = loose.sandbox.clone().expect("its sandbox");
    assert_eq!(report.state, SandboxState::Partly, "{}", report.line());
    assert_eq!(report.missing(), vec![SandboxPart::Network]);
    assert_eq!(
        snapshot.server("good").map(|s| s.state),
        Some(ServerState::Ready)
    );
    let _ = host.shutdown().await;
}

/// A path the zoo lists in `.cache/peers.env`.
fn zoo(key: &str) -> String {
    peers::peers();
    let env = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../.cache/peers.env"
    ))
    .expect("peers.env");
    env.lines()
        .find_map(|line| line.strip_prefix(&format!("{key}=")))
        .map(|value| value.trim_matches(['\'', '"']).to_owned())
        .unwrap_or_else(|| panic!("{key} missing from peers.env"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_people_install_work_under_the_default_policy() {
    let dir = scratch("zoo");
    let (files, memory, repo, data) = (
        dir.join("files"),
        dir.join("memory"),
        dir.join("repo"),
        dir.join("data"),
    );
    for folder in [&files, &memory, &data] {
        std::fs::create_dir_all(folder).expect("a folder");
    }
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", &repo.display().to_string()]);
    let npm = zoo("ZOO_NPM");
    let venv = zoo("ZOO_VENV");
    let sqlite = zoo("ZOO_SQLITE");
    let path = |p: &Path| p.display().to_string();
    let mut map = BTreeMap::new();
    let mut declare = |alias: &str, command: String, args: Value, env: Value, sandbox: Value| {
        let upper = alias.to_ascii_uppercase();
        map.insert(format!("PLURNK_MCP_{upper}"), command);
        map.insert(format!("PLURNK_MCP_{upper}_ARGS"), args.to_string());
        map.insert(format!("PLURNK_MCP_{upper}_ENV"), env.to_string());
        map.insert(format!("PLURNK_MCP_{upper}_SANDBOX"), sandbox.to_string());
    };
    declare(
        "files",
        format!("{npm}/node_modules/.bin/mcp-server-filesystem"),
        json!([path(&files)]),
        json!({}),
        json!({"write": [path(&files)]}),
    );
    declare(
        "memory",
        format!("{npm}/node_modules/.bin/mcp-server-memory"),
        json!([]),
        json!({"MEMORY_FILE_PATH": path(&memory.join("memory.jsonl"))}),
        json!({"write": [path(&memory)]}),
    );
    declare(
        "git",
        format!("{venv}/bin/mcp-server-git"),
        json!(["--repository", path(&repo)]),
        json!({}),
        json!({"write": [path(&repo)]}),
    );
    declare(
        "sqlite",
        format!("{sqlite}/bin/mcp-server-sqlite"),
        json!(["--db-path", path(&data.join("zoo.db"))]),
        json!({}),
        json!({"write": [path(&data)]}),
    );
    declare(
        "time",
        format!("{venv}/bin/mcp-server-time"),
        json!([]),
        json!({}),
        json!({}),
    );
    let everything = peers::peers();
    declare(
        "everything",
        everything.node.clone(),
        json!([everything.everything, "stdio"]),
        json!({}),
        json!({}),
    );
    declare(
        "python",
        everything.python.clone(),
        json!([everything.python_peer]),
        json!({}),
        json!({}),
    );
    map.insert(
        "PLURNK_MCP_ENABLED".into(),
        json!([
            "files",
            "memory",
            "git",
            "sqlite",
            "time",
            "everything",
            "python"
        ])
        .to_string(),
    );
    map.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), "60000".into());
    let host = Host::start(default_policy(map)).await.expect("host starts");
    let ws = host.default_workspace();
    let snapshot = ws.snapshot();
    for (alias, server) in snapshot.servers.iter() {
        assert_eq!(
            server.state,
            ServerState::Ready,
            "{alias}: {:?}",
            server.problem
        );
        let report = server.sandbox.clone().expect("a sandbox report");
        assert_eq!(
            report.state,
            SandboxState::Held,
            "{alias}: {}",
            report.line()
        );
    }
    let call = |alias: &'static str, tool: &'static str, arguments: Value| {
        let ws = ws.clone();
        async move {
            let result = ws
                .call_tool(alias, tool, arguments, CallOptions::default())
                .await
                .unwrap_or_else(|error| panic!("{alias}/{tool}: {error}"));
            assert!(!result.is_error, "{alias}/{tool}: {}", result.text());
            result.text()
        }
    };
    let note = path(&files.join("note.txt"));
    call(
        "files",
        "write_file",
        json!({"path": note, "content": "kept"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(files.join("note.txt")).expect("written"),
        "kept"
    );
    call(
        "memory",
        "create_entities",
        json!({"entities": [{"name": "ada", "entityType": "person", "observations": ["wrote"]}]}),
    )
    .await;
    assert!(
        std::fs::read_to_string(memory.join("memory.jsonl"))
            .expect("the memory file")
            .contains("ada")
    );
    let status = call("git", "git_status", json!({"repo_path": path(&repo)})).await;
    assert!(status.contains("On branch"), "{status}");
    call(
        "sqlite",
        "write_query",
        json!({"query": "create table t (x int)"}),
    )
    .await;
    let tables = call("sqlite", "list_tables", json!({})).await;
    assert!(tables.contains("'t'"), "{tables}");
    let now = call("time", "get_current_time", json!({"timezone": "UTC"})).await;
    assert!(now.contains("\"timezone\": \"UTC\""), "{now}");
    let echoed = call("everything", "echo", json!({"message": "zoo"})).await;
    assert!(echoed.contains("zoo"), "{echoed}");
    let _ = host.shutdown().await;
}

#[test]
fn sandbox_check_says_what_this_machine_can_enforce_and_why_not() {
    let output = std::process::Command::new(EXE)
        .args(["sandbox", "check", "--json"])
        .output()
        .expect("plurnk-mcp runs");
    let findings: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON");
    let features: Vec<&str> = findings
        .iter()
        .filter_map(|finding| finding["feature"].as_str())
        .collect();
    for part in [
        "landlock",
        "seccomp",
        "user namespaces",
        "PID namespaces",
        "network namespaces",
        "resource limits",
    ] {
        assert!(features.contains(&part), "{part} not in {features:?}");
    }
    for finding in &findings {
        assert!(
            finding["detail"]
                .as_str()
                .is_some_and(|detail| !detail.is_empty()),
            "{finding}"
        );
    }
    // Exit 0 only when every part is there: a missing one is said, with why.
    let all = findings.iter().all(|finding| finding["available"] == true);
    assert_eq!(output.status.success(), all, "{findings:#?}");
}
