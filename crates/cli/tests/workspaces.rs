//! Workspaces that remember: management actions, the cascade through `enable`, durable
//! state in a real SQLite file, restart that rehydrates, and workspaces that never wait for
//! each other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use plurnk_mcp::config::{McpServerOptions, Overlay};
use plurnk_mcp::store::{Change, Expect, StoreFuture, Version};
use plurnk_mcp::{
    CallError, CallOptions, Customize, Host, HostConfig, HostEvent, HostOptions, MemoryStore,
    RestartPolicy, ServerDefinition, ServerState, ServerSummary, SqliteStore, Store, StoreError,
    Workspace, WorkspaceRecord, WorkspaceRestart,
};
use plurnk_mcp_fixture::probe::Probe;
use serde_json::json;

#[path = "support/calls.rs"]
mod calls;
#[path = "support/env.rs"]
mod env;
#[path = "support/wait.rs"]
mod wait;
use calls::{BOUND, pid_of, shutdown_clean};
use env::EXE;

/// A fresh folder under cargo's per-target temporary directory.
fn scratch(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "workspaces-{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The bytes of a SQLite database and its WAL, to prove a failure wrote nothing.
fn db_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap_or_default();
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    bytes.extend(std::fs::read(PathBuf::from(wal)).unwrap_or_default());
    bytes
}

fn config(extra: &[(&str, &str)]) -> HostConfig {
    let mut map: BTreeMap<String, String> = BTreeMap::from([
        ("PLURNK_MCP_SVC".into(), EXE.into()),
        (
            "PLURNK_MCP_SVC_ARGS".into(),
            json!(["fixture", "--name", "svc"]).to_string(),
        ),
        ("PLURNK_MCP_BROKEN".into(), "/nonexistent/mcp-server".into()),
        ("PLURNK_MCP_ENABLED".into(), json!(["svc"]).to_string()),
        ("PLURNK_MCP_CONNECT_TIMEOUT".into(), "5000".into()),
        ("SECRET_ARG".into(), "s3cr3t-value-4711".into()),
        // The operator lets workspaces add servers that refer to these names.
        ("PLURNK_MCP_ALLOW_ADD".into(), "true".into()),
        (
            "PLURNK_MCP_WORKSPACE_ENV".into(),
            json!(["SECRET_ARG", "LATER_NAME"]).to_string(),
        ),
    ]);
    for (key, value) in extra {
        map.insert((*key).into(), (*value).into());
    }
    HostConfig::from_env(map).expect("valid test configuration")
}

async fn start(path: &Path, config: HostConfig) -> Host {
    let store = SqliteStore::open(path).expect("the state file opens");
    Host::start_with(
        config,
        HostOptions::default().with_store(Some(Arc::new(store))),
    )
    .await
    .expect("host starts")
}

fn fixture_definition(alias: &str, name: &str) -> ServerDefinition {
    let options =
        McpServerOptions::from_json(&json!({"args": ["fixture", "--name", name]}).to_string())
            .expect("valid options");
    ServerDefinition::from_target(alias, EXE)
        .and_then(|definition| definition.with_options(&options))
        .expect("a valid definition")
}

/// How `workspace` lists `alias` (the listing must hold it).
async fn summary_of(workspace: &Workspace, alias: &str) -> ServerSummary {
    let listed = workspace.list().await.expect("list");
    listed
        .into_iter()
        .find(|s| s.alias == alias)
        .unwrap_or_else(|| panic!("{alias} is listed"))
}

/// The process id of the fixture serving `alias`.
/// Enable options that run the fixture under another name.
fn renamed_fixture(name: &str) -> Customize {
    let options = json!({"args": ["fixture", "--name", name]}).to_string();
    Customize::default().with_options(Some(McpServerOptions::from_json(&options).expect("parses")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_and_disabled_servers_survive_a_restart_without_their_secrets() {
    let dir = scratch("restart");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[])).await;
    let a = host.workspace("a").await.expect("workspace a");
    let b = host.workspace("b").await.expect("workspace b");
    let added = a
        .add(fixture_definition("extra", "${SECRET_ARG}"))
        .await
        .expect("add connects");
    assert_eq!(added.state, ServerState::Ready);
    // The reference was expanded for the connection: the server reports the value as its
    // name (unexpanded it would say "${SECRET_ARG}"), and the host scrubs it on the way out.
    let name = added.negotiated.as_ref().and_then(|n| n.name.clone());
    assert_eq!(name.as_deref(), Some("<redacted>"));
    let disabled = b.disable("svc").await.expect("disable");
    assert_eq!(disabled.state, ServerState::Disabled);
    shutdown_clean(host).await;

    let host = start(&db, config(&[])).await;
    let a = host.workspace("a").await.expect("workspace a");
    let b = host.workspace("b").await.expect("workspace b");
    let extra = a
        .snapshot()
        .server("extra")
        .cloned()
        .expect("the added server is back");
    assert_eq!(extra.state, ServerState::Ready, "{:?}", extra.problem);
    let echo = a
        .call_tool(
            "extra",
            "echo",
            json!({"text": "again"}),
            CallOptions::default(),
        )
        .await
        .expect("it answers");
    assert_eq!(echo.text(), "again");
    assert_eq!(
        b.snapshot().server("svc").map(|s| s.state),
        Some(ServerState::Disabled)
    );
    assert!(
        b.snapshot().server("extra").is_none(),
        "workspaces are separate"
    );
    assert_eq!(
        host.default_workspace()
            .snapshot()
            .server("svc")
            .map(|s| s.state),
        Some(ServerState::Ready),
        "the service default still holds elsewhere"
    );
    let extra = summary_of(&a, "extra").await;
    assert_eq!((extra.source, extra.enabled), ("workspace", true));
    shutdown_clean(host).await;

    let bytes = db_bytes(&db);
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains("s3cr3t-value-4711"),
        "an expanded value reached the database"
    );
    assert!(
        text.contains("${SECRET_ARG}"),
        "the unexpanded reference is what is kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_add_or_enable_changes_nothing() {
    let dir = scratch("failing");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[])).await;
    let workspace = host.default_workspace();
    let pid = workspace
        .call_tool("svc", "pid", json!({}), CallOptions::default())
        .await
        .expect("pid")
        .text();
    let before_bytes = db_bytes(&db);
    let before = workspace.snapshot();

    // An unreachable target.
    let unreachable =
        ServerDefinition::from_target("ghost", "/nonexistent/ghost-server").expect("valid");
    let problem = workspace
        .add(unreachable)
        .await
        .expect_err("cannot connect");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (502, "server-unavailable")
    );
    assert!(problem.retryable);
    assert!(
        problem.detail.contains("\"ghost\" (stdio)"),
        "{}",
        problem.detail
    );
    // A tool policy the server contradicts.
    let options = McpServerOptions::from_json(r#"{"args":["fixture"],"tools":["no-such-tool"]}"#)
        .expect("valid options");
    let mismatch = ServerDefinition::from_target("picky", EXE)
        .and_then(|d| d.with_options(&options))
        .expect("valid");
    let problem = workspace.add(mismatch).await.expect_err("policy mismatch");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (502, "server-unavailable")
    );
    assert!(
        problem.detail.contains("no-such-tool"),
        "{}",
        problem.detail
    );
    // Options that do not fit the transport are refused before any connection work.
    let http_args = McpServerOptions::from_json(r#"{"args":["x"]}"#).expect("parses");
    let refused = ServerDefinition::from_target("web", "https://example.test/mcp")
        .and_then(|d| d.with_options(&http_args));
    assert!(
        refused
            .as_ref()
            .is_err_and(|errors| errors.iter().any(|e| matches!(
                e,
                plurnk_mcp::ConfigError::WrongTransport { .. }
            ) && e.to_string().contains("args"))),
        "{refused:?}"
    );
    // Enabling a service server that cannot connect.
    let problem = workspace
        .enable("broken")
        .await
        .expect_err("cannot connect");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (502, "server-unavailable")
    );
    // Enabling with options the cascade refuses.
    let bad = Customize::default().with_options(Some(
        McpServerOptions::from_json(r#"{"headers":{"x":"y"}}"#).expect("parses"),
    ));
    let problem = workspace
        .enable_with("svc", bad)
        .await
        .expect_err("headers on stdio");
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (400, "invalid-definition")
    );

    assert_eq!(
        db_bytes(&db),
        before_bytes,
        "the database bytes are unchanged"
    );
    let after = workspace.snapshot();
    assert_eq!(after.servers, before.servers, "the snapshot is unchanged");
    assert_eq!(
        after.server("broken").map(|s| s.state),
        Some(ServerState::Disabled)
    );
    let pid_after = workspace
        .call_tool("svc", "pid", json!({}), CallOptions::default())
        .await
        .expect("pid")
        .text();
    assert_eq!(pid, pid_after, "the other attachment was not touched");
    // A failed add left no trace: the alias is free, listed nowhere, and can be added again.
    let listed = workspace.list().await.expect("list");
    assert!(
        !listed
            .iter()
            .any(|s| s.alias == "ghost" || s.alias == "picky"),
        "{listed:?}"
    );
    let fixed = workspace
        .add(fixture_definition("ghost", "ghost"))
        .await
        .expect("the alias of a failed add is free");
    assert_eq!(fixed.state, ServerState::Ready);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_action_answers_with_its_problem_shape() {
    let dir = scratch("problems");
    let host = start(&dir.join("state.sqlite"), config(&[])).await;
    let workspace = host.default_workspace();
    for problem in [
        workspace.enable("nobody").await.expect_err("unknown"),
        workspace.disable("nobody").await.expect_err("unknown"),
        workspace.remove("nobody").await.expect_err("unknown"),
    ] {
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (404, "unknown-server")
        );
        assert!(problem.detail.contains("\"nobody\""), "{}", problem.detail);
    }
    // A caller's name is echoed cut, with its length: a megabyte asked for is not a
    // megabyte answered.
    let long = "n".repeat(100_000);
    let call = workspace
        .call_tool(&long, "pid", json!({}), CallOptions::default())
        .await
        .expect_err("unknown");
    let tool = workspace
        .call_tool("svc", &long, json!({}), CallOptions::default())
        .await
        .expect_err("unknown tool");
    for shown in [
        workspace.enable(&long).await.expect_err("unknown").detail,
        workspace.disable(&long).await.expect_err("unknown").detail,
        workspace.remove(&long).await.expect_err("unknown").detail,
        call.to_string(),
        tool.to_string(),
    ] {
        assert!(
            shown.len() < 300,
            "{} bytes: {}",
            shown.len(),
            &shown[..300]
        );
        assert!(shown.contains(&format!("{}… (", &long[..64])), "{shown}");
    }
    let problem = workspace
        .add(fixture_definition("svc", "svc"))
        .await
        .expect_err("an existing alias");
    assert_eq!((problem.status, problem.kind.as_str()), (409, "conflict"));
    let problem = workspace.remove("svc").await.expect_err("a service server");
    assert_eq!((problem.status, problem.kind.as_str()), (409, "conflict"));
    assert!(
        problem.detail.contains("disable it instead"),
        "{}",
        problem.detail
    );
    // Already enabled and connected: a no-op.
    let same = workspace.enable("svc").await.expect("no-op");
    assert_eq!(same.state, ServerState::Ready);
    // Already disabled: a no-op too.
    workspace.disable("broken").await.expect("no-op");
    // Enabled and connected with another definition: the new one is swapped in, and the
    // snapshot that answers it shows the server as the new definition serves it.
    let before = pid_of(&workspace, "svc").await;
    let swapped = workspace
        .enable_with("svc", renamed_fixture("other"))
        .await
        .expect("a definition change swaps");
    assert_eq!(swapped.state, ServerState::Ready);
    assert_eq!(
        swapped.negotiated.and_then(|n| n.name.clone()).as_deref(),
        Some("other")
    );
    assert_ne!(
        pid_of(&workspace, "svc").await,
        before,
        "still the old process"
    );
    assert_eq!(summary_of(&workspace, "svc").await.source, "specialized");
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_literal_credential_is_refused_before_anything_connects_and_never_stored() {
    // A literal credential in every kind of kept definition; each refused with a 400 that
    // names the field, before any connection, process or state write.
    const LITERAL: &str = "letmein-4711-literal";
    const TOKEN: &str = "ghp_4f9Qz7LmXw2Rt8KpB3nV6yHc1JdS0aEuGi5o";
    let dir = scratch("literal");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[])).await;
    let workspace = host.workspace("w").await.expect("w");
    // A real endpoint that counts every connection it is offered.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("loopback");
    let port = listener.local_addr().expect("an address").port();
    let dialled = Arc::new(AtomicUsize::new(0));
    let counter = dialled.clone();
    let accepting = tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let probe = Probe::start().await;
    let before = db_bytes(&db);
    let options = |json: serde_json::Value| {
        McpServerOptions::from_json(&json.to_string()).expect("valid options")
    };
    let http = ServerDefinition::from_target("web", &format!("http://127.0.0.1:{port}/mcp"))
        .and_then(|d| d.with_options(&options(json!({"headers": {"X-Auth": LITERAL}}))))
        .expect("a definition");
    let stdio = ServerDefinition::from_target("local", EXE)
        .and_then(|d| {
            d.with_options(&options(json!({
                "args": ["fixture", "--probe", probe.address(), "--token", LITERAL],
                "env": {"CLIENT_SECRET": "pa$$w0rd"},
            })))
        })
        .expect("a definition");
    let source = plurnk_mcp::sources::definition(
        "tool",
        plurnk_mcp::sources::SourceKind::Cli,
        json!({"kind": "cli", "name": "tool", "command": "true",
            "env": {"CLIENT_SECRET": LITERAL}, "tools": [{"name": "run"}]}),
        "the add action",
    )
    .expect("a declaration");
    let cases = [
        ("web", workspace.add(http).await, vec!["headers.\"X-Auth\""]),
        (
            "local",
            workspace.add(stdio).await,
            vec!["args[4] (the value of --token)", "env.\"CLIENT_SECRET\""],
        ),
        (
            "tool",
            workspace.add(source).await,
            vec!["declaration.env.\"CLIENT_SECRET\""],
        ),
        // A customization is kept as a specialization: the same refusal.
        (
            "svc",
            workspace
                .enable_with(
                    "svc",
                    Customize::default()
                        .with_options(Some(options(json!({"env": {"SETTINGS": TOKEN}})))),
                )
                .await,
            vec!["env.\"SETTINGS\" (a token-shaped value)"],
        ),
    ];
    for (alias, answer, fields) in cases {
        let problem = answer.expect_err("a literal credential");
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (400, "literal-credential"),
            "{alias}: {problem}"
        );
        let server = format!("server \"{alias}\"");
        for said in
            fields
                .into_iter()
                .chain([server.as_str(), "${NAME}", "PLURNK_MCP_WORKSPACE_ENV"])
        {
            assert!(problem.detail.contains(said), "{alias}: {}", problem.detail);
        }
        for value in [LITERAL, TOKEN, "pa$$w0rd"] {
            assert!(!problem.detail.contains(value), "{}", problem.detail);
        }
    }
    assert_eq!(
        dialled.load(Ordering::SeqCst),
        0,
        "the endpoint was dialled"
    );
    assert!(
        probe.events().is_empty(),
        "the server ran: {:?}",
        probe.events()
    );
    assert_eq!(db_bytes(&db), before, "the state file changed");
    for alias in ["web", "local", "tool"] {
        assert!(workspace.snapshot().server(alias).is_none(), "{alias}");
    }
    assert_eq!(summary_of(&workspace, "svc").await.source, "service");
    accepting.abort();
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customized_enable_specializes_and_remove_reveals_the_service_definition() {
    let dir = scratch("cascade");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[("PLURNK_MCP_ENABLED", "[]")])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    // Enabled as the service defines it, it stays the service's; a server the workspace
    // added stays the workspace's whatever it is enabled with.
    workspace.enable("svc").await.expect("enable");
    assert_eq!(summary_of(&workspace, "svc").await.source, "service");
    workspace.disable("svc").await.expect("disable");
    workspace
        .add(fixture_definition("mine", "mine"))
        .await
        .expect("add");
    workspace.disable("mine").await.expect("disable");
    workspace
        .enable_with("mine", renamed_fixture("renamed"))
        .await
        .expect("enable");
    assert_eq!(summary_of(&workspace, "mine").await.source, "workspace");
    // The overlay (client configuration, environment syntax) renames; options restrict tools.
    let overlay = Overlay::from_env_map(BTreeMap::from([(
        "PLURNK_MCP_SVC_ARGS".to_owned(),
        json!(["fixture", "--name", "from-overlay"]).to_string(),
    )]))
    .expect("a valid overlay");
    let customize = Customize::default()
        .with_overlay(overlay.server("svc"))
        .with_options(Some(
            McpServerOptions::from_json(r#"{"tools":["echo"]}"#).expect("parses"),
        ));
    let enabled = workspace
        .enable_with("svc", customize)
        .await
        .expect("enable");
    assert_eq!(enabled.state, ServerState::Ready);
    let names: Vec<&str> = enabled.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo"], "options replace the tool list");
    assert_eq!(
        enabled.negotiated.as_ref().and_then(|n| n.name.as_deref()),
        Some("from-overlay"),
        "the overlay's arguments replaced the service's"
    );
    assert_eq!(summary_of(&workspace, "svc").await.source, "specialized");
    // A server only the client's overlay defines is shown, disabled, and goes nowhere.
    let carried = Overlay::from_env_map(BTreeMap::from([(
        "PLURNK_MCP_CLIENTONLY".to_owned(),
        "https://client.example.test/mcp".to_owned(),
    )]))
    .expect("overlay");
    let listed = workspace.list_with(Some(&carried)).await.expect("list");
    let client = listed
        .iter()
        .find(|s| s.alias == "clientonly")
        .expect("shown");
    assert_eq!(
        (client.source, client.enabled, client.state),
        ("client", false, ServerState::Disabled)
    );
    assert!(
        workspace.snapshot().server("clientonly").is_none(),
        "not connected"
    );
    shutdown_clean(host).await;

    // The specialization is durable.
    let host = start(&db, config(&[("PLURNK_MCP_ENABLED", "[]")])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    let svc = workspace.snapshot().server("svc").cloned().expect("svc");
    assert_eq!(svc.state, ServerState::Ready);
    assert_eq!(svc.tools.len(), 1);
    // Removing it reveals the service definition, disabled.
    let removed = workspace
        .remove("svc")
        .await
        .expect("remove the specialization");
    assert_eq!(removed.state, ServerState::Disabled);
    let svc = summary_of(&workspace, "svc").await;
    assert_eq!((svc.source, svc.enabled), ("service", false));
    shutdown_clean(host).await;

    // ...and stays so after a restart, even where the service enables it by default.
    let host = start(&db, config(&[("PLURNK_MCP_ENABLED", r#"["svc"]"#)])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    let svc = workspace.snapshot().server("svc").cloned().expect("svc");
    assert_eq!(svc.state, ServerState::Disabled, "{:?}", svc.problem);
    let svc = summary_of(&workspace, "svc").await;
    assert_eq!((svc.source, svc.enabled), ("service", false));
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_server_in_one_workspace_never_delays_another() {
    let dir = scratch("independent");
    let probe = Probe::start().await;
    let host = start(&dir.join("state.sqlite"), config(&[])).await;
    let a = host.workspace("a").await.expect("a");
    let b = host.workspace("b").await.expect("b");
    // A server that holds its tools/list until the probe lets it go: its add in A stays
    // under way for as long as the test likes.
    let hang = {
        let a = a.clone();
        let args = json!({"args": ["fixture", "--name", "held", "--probe", probe.address(), "--hold-lists"]});
        tokio::spawn(async move {
            let options = McpServerOptions::from_json(&args.to_string()).expect("parses");
            let held = ServerDefinition::from_target("held", EXE)
                .and_then(|d| d.with_options(&options))
                .expect("valid");
            a.add(held).await
        })
    };
    probe.wait_gate("tools/list", BOUND).await;
    // While A's add is under way, B's actions and calls run, and so does A's own list.
    let listed = b.list().await.expect("list in b");
    assert!(!listed.is_empty());
    b.disable("svc").await.expect("disable in b");
    b.enable("svc").await.expect("enable in b");
    let echo = b
        .call_tool("svc", "echo", json!({"text": "b"}), CallOptions::default())
        .await
        .expect("a call in b");
    assert_eq!(echo.text(), "b");
    a.list().await.expect("list in a");
    assert!(
        !hang.is_finished(),
        "the add cannot finish before its list is released"
    );
    assert_eq!(probe.release_all().await, 1);
    let added = tokio::time::timeout(BOUND, hang)
        .await
        .expect("the add finishes once listed")
        .expect("no panic")
        .expect("the add succeeds");
    assert_eq!(added.state, ServerState::Ready);
    shutdown_clean(host).await;
}

#[tokio::test]
async fn a_newer_or_foreign_state_file_is_refused_untouched() {
    let dir = scratch("refuse");
    let garbage = dir.join("garbage.sqlite");
    std::fs::write(&garbage, b"this is not a database at all, not even close").expect("write");
    let before = std::fs::read(&garbage).expect("read");
    let error = SqliteStore::open(&garbage).expect_err("refused");
    assert!(
        matches!(error, plurnk_mcp::StoreError::Corrupt { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("garbage.sqlite"), "{error}");
    assert_eq!(std::fs::read(&garbage).expect("read"), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_server_whose_variable_is_gone_locks_nobody_out() {
    let dir = scratch("gone-variable");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[("LATER_NAME", "later-name-1234")])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    workspace
        .add(fixture_definition("later", "${LATER_NAME}"))
        .await
        .expect("add connects");
    shutdown_clean(host).await;

    // LATER_NAME is no longer set: the host still starts, and only that server is down.
    let host = start(&db, config(&[])).await;
    let workspace = host
        .workspace("w")
        .await
        .expect("the workspace still opens");
    let snapshot = workspace.snapshot();
    let later = snapshot.server("later").expect("still there");
    assert_eq!(later.state, ServerState::Unavailable);
    let detail = later
        .problem
        .as_ref()
        .map(|p| p.detail.clone())
        .unwrap_or_default();
    assert!(detail.contains("LATER_NAME"), "{detail}");
    assert_eq!(
        snapshot.server("svc").map(|s| s.state),
        Some(ServerState::Ready)
    );
    // And it can be removed, as the Problem suggests.
    workspace.remove("later").await.expect("remove");
    shutdown_clean(host).await;
    let host = start(&db, config(&[])).await;
    let workspace = host.workspace("w").await.expect("workspace");
    assert!(workspace.snapshot().server("later").is_none());
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_adding_one_alias_to_one_state_file_lose_nothing() {
    let dir = scratch("twins");
    let db = dir.join("state.sqlite");
    let first = start(&db, config(&[])).await;
    let second = start(&db, config(&[])).await;
    let (a, b) = (
        first.workspace("w").await.expect("w"),
        second.workspace("w").await.expect("w"),
    );
    let (one, two) = tokio::join!(
        a.add(fixture_definition("twin", "first")),
        b.add(fixture_definition("twin", "second")),
    );
    let outcomes = [&one, &two];
    let won: Vec<_> = outcomes.iter().filter(|o| o.is_ok()).collect();
    let lost: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(won.len(), 1, "{one:?} {two:?}");
    assert_eq!(lost.len(), 1);
    assert_eq!((lost[0].status, lost[0].kind.as_str()), (409, "conflict"));
    assert!(
        lost[0].detail.contains("another process"),
        "{}",
        lost[0].detail
    );
    let winner = if one.is_ok() { "first" } else { "second" };
    shutdown_clean(first).await;
    shutdown_clean(second).await;
    // What is stored is the winner's definition, and it is what comes back.
    let host = start(&db, config(&[])).await;
    let workspace = host.workspace("w").await.expect("w");
    let twin = workspace
        .snapshot()
        .server("twin")
        .cloned()
        .expect("stored");
    assert_eq!(twin.state, ServerState::Ready, "{:?}", twin.problem);
    assert_eq!(
        twin.negotiated.as_ref().and_then(|n| n.name.as_deref()),
        Some(winner)
    );
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_gate_admits_only_what_the_operator_allows() {
    let dir = scratch("gate");
    let db = dir.join("state.sqlite");
    // Off by default: no runtime add, no customized enable.
    let closed = config(&[("PLURNK_MCP_ALLOW_ADD", "false")]);
    let host = start(&db, closed).await;
    let workspace = host.workspace("w").await.expect("w");
    let refused = workspace
        .add(fixture_definition("extra", "extra"))
        .await
        .expect_err("no runtime add");
    assert_eq!((refused.status, refused.kind.as_str()), (403, "forbidden"));
    assert!(
        refused.detail.contains("PLURNK_MCP_ALLOW_ADD=true"),
        "{}",
        refused.detail
    );
    let customized = renamed_fixture("custom");
    let refused = workspace
        .enable_with("svc", customized.clone())
        .await
        .expect_err("no customized enable");
    assert_eq!(refused.status, 403);
    // A plain enable of a declared server is not gated.
    workspace.enable("svc").await.expect("plain enable");
    shutdown_clean(host).await;

    // Allowed, but an added definition may refer only to the names handed to workspaces.
    let open = config(&[("OPERATOR_TOKEN", "operator-only-9999")]);
    let host = start(&db, open).await;
    let workspace = host.workspace("w").await.expect("w");
    let refused = workspace
        .add(fixture_definition("greedy", "${OPERATOR_TOKEN}"))
        .await
        .expect_err("a name not handed over");
    assert_eq!(refused.status, 403);
    assert!(
        refused.detail.contains("${OPERATOR_TOKEN}"),
        "{}",
        refused.detail
    );
    assert!(!refused.detail.contains("operator-only-9999"));
    let added = workspace
        .add(fixture_definition("fine", "${SECRET_ARG}"))
        .await
        .expect("a handed-over name");
    assert_eq!(added.state, ServerState::Ready);
    // The gate lets it through, and the connected server changes definition in place.
    let changed = workspace
        .enable_with("svc", customized)
        .await
        .expect("the gate admits it, and the definition is swapped in");
    assert_eq!(changed.state, ServerState::Ready);
    assert_eq!(summary_of(&workspace, "svc").await.source, "specialized");
    shutdown_clean(host).await;

    // The name is no longer handed over: the stored server cannot expand it on restart.
    let narrowed = config(&[("PLURNK_MCP_WORKSPACE_ENV", "[]")]);
    let host = start(&db, narrowed).await;
    let workspace = host.workspace("w").await.expect("w");
    let fine = workspace
        .snapshot()
        .server("fine")
        .cloned()
        .expect("stored");
    assert_eq!(fine.state, ServerState::Unavailable);
    let detail = fine.problem.map(|p| p.detail).unwrap_or_default();
    assert!(detail.contains("SECRET_ARG"), "{detail}");
    shutdown_clean(host).await;
}

/// Waits (bounded) until the process `pid` is gone.
async fn wait_gone(pid: i32, what: &str) {
    // SAFETY: signal 0 only probes for existence.
    let gone = wait::until(BOUND, || unsafe { libc::kill(pid, 0) } != 0).await;
    assert!(gone, "{what} outlived it");
}

/// Waits (bounded) for the first event `pick` accepts.
async fn next_event<T>(
    events: &mut tokio::sync::broadcast::Receiver<HostEvent>,
    what: &str,
    pick: impl Fn(&HostEvent) -> Option<T>,
) -> T {
    let found = tokio::time::timeout(BOUND, async {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let Some(found) = pick(&event) {
                        return found;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(error) => panic!("the event stream ended while waiting for {what}: {error}"),
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("no {what} event"))
}

fn ready(snapshot: &plurnk_mcp::WorkspaceSnapshot, aliases: &[&str]) -> bool {
    aliases.iter().all(|alias| {
        snapshot
            .server(alias)
            .is_some_and(|server| server.state == ServerState::Ready)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_workspace_is_restarted_and_the_handle_taken_before_still_calls() {
    let probe = Probe::start().await;
    let db = scratch("restarted").join("state.sqlite");
    let args = json!(["fixture", "--name", "svc", "--probe", probe.address()]).to_string();
    let host = start(&db, config(&[("PLURNK_MCP_SVC_ARGS", &args)])).await;
    let first = host.workspace("w").await.expect("workspace");
    // What the restart must bring back from the store: a server this workspace added.
    first
        .add(fixture_definition("extra", "${SECRET_ARG}"))
        .await
        .expect("added");
    let old_svc = pid_of(&first, "svc").await;
    let old_extra = pid_of(&first, "extra").await;
    let version = first.snapshot().version;
    // A call the server holds when the workspace fails, with a deadline far past the bound.
    let held = {
        let workspace = first.clone();
        tokio::spawn(async move {
            let options =
                CallOptions::default().with_timeout(Some(std::time::Duration::from_secs(120)));
            workspace
                .call_tool("svc", "gate", json!({"id": "held"}), options)
                .await
        })
    };
    probe.wait_gate("held", BOUND).await;
    let mut events = host.events();
    assert!(first.crash_for_test());
    let outcome = tokio::time::timeout(BOUND, held)
        .await
        .expect("the call in flight on the failed workspace settles, it does not hang")
        .expect("no panic");
    assert!(
        matches!(
            outcome,
            Err(CallError::ConnectionLost { .. } | CallError::Closing { .. })
        ),
        "settled with a typed error: {outcome:?}"
    );
    let (failures, problem) = next_event(&mut events, "WorkspaceRestarted", |event| match event {
        HostEvent::WorkspaceRestarted {
            workspace,
            failures,
            problem,
        } if workspace == "w" => Some((*failures, problem.clone())),
        _ => None,
    })
    .await;
    assert_eq!(failures, 1);
    assert_eq!(problem.kind, "workspace-failed");
    assert!(problem.detail.contains("workspace \"w\""), "{problem}");
    // The dead generation's servers are gone...
    wait_gone(old_svc, "the failed workspace's server").await;
    wait_gone(old_extra, "the failed workspace's added server").await;
    // ...and the handle taken before the failure sees the new generation come up, with the
    // added server restored from the store, and calls and acts through it.
    let snapshot = first
        .wait_for(BOUND, |snapshot| ready(snapshot, &["svc", "extra"]))
        .await;
    assert!(ready(&snapshot, &["svc", "extra"]), "{snapshot:?}");
    assert!(snapshot.version > version, "versions never go back");
    assert!(first.is_running());
    assert_ne!(pid_of(&first, "svc").await, old_svc);
    let echoed = first
        .call_tool(
            "svc",
            "echo",
            json!({"text": "after"}),
            CallOptions::default(),
        )
        .await
        .expect("a call through the old handle");
    assert_eq!(echoed.text(), "after");
    let disabled = first
        .disable("extra")
        .await
        .expect("an action through the old handle");
    assert_eq!(disabled.state, ServerState::Disabled);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_failing_too_often_stays_failed_with_one_problem_until_opened_again() {
    let host = Host::start_with(
        config(&[]),
        HostOptions::default()
            .with_store(Some(Arc::new(MemoryStore::default())))
            .with_workspace_restart(
                WorkspaceRestart::default()
                    .with_max_failures(3)
                    .with_window(std::time::Duration::from_secs(600)),
            ),
    )
    .await
    .expect("host starts");
    let workspace = host.workspace("w").await.expect("workspace");
    let mut events = host.events();
    let mut pids = Vec::new();
    for round in 1..=3 {
        let snapshot = workspace
            .wait_for(BOUND, |snapshot| ready(snapshot, &["svc"]))
            .await;
        assert!(ready(&snapshot, &["svc"]), "round {round}: {snapshot:?}");
        assert!(workspace.is_running());
        pids.push(pid_of(&workspace, "svc").await);
        assert!(workspace.crash_for_test());
        if round < 3 {
            let failures = next_event(&mut events, "WorkspaceRestarted", |event| match event {
                HostEvent::WorkspaceRestarted { failures, .. } => Some(*failures),
                _ => None,
            })
            .await;
            assert_eq!(failures, round);
        }
    }
    let problem = next_event(&mut events, "WorkspaceFailed", |event| match event {
        HostEvent::WorkspaceFailed { workspace, problem } if workspace == "w" => {
            Some(problem.clone())
        }
        HostEvent::WorkspaceRestarted { .. } => panic!("restarted past its limit"),
        _ => None,
    })
    .await;
    assert_eq!(
        (problem.status, problem.kind.as_str()),
        (503, "workspace-failed")
    );
    assert!(
        problem.detail.contains("failed 3 times within 600 s")
            && problem.detail.contains("open it again by name"),
        "{problem}"
    );
    for pid in pids {
        wait_gone(pid, "a failed generation's server").await;
    }
    // What a user sees of it: the server unavailable with the workspace's Problem, calls and
    // actions refused with it, the handle not running.
    let snapshot = workspace
        .wait_for(BOUND, |snapshot| {
            snapshot
                .server("svc")
                .is_some_and(|server| server.state == ServerState::Unavailable)
        })
        .await;
    let svc = snapshot.server("svc").expect("still shown");
    assert_eq!(svc.state, ServerState::Unavailable);
    assert_eq!(svc.problem.as_ref(), Some(&problem));
    assert!(svc.tools.is_empty());
    assert_eq!(workspace.failure(), Some(problem.clone()));
    assert!(!workspace.is_running());
    let refused = workspace
        .call_tool("svc", "echo", json!({"text": "x"}), CallOptions::default())
        .await;
    assert!(
        matches!(&refused, Err(CallError::NotReady { detail, .. }) if detail == &problem.detail),
        "{refused:?}"
    );
    assert_eq!(workspace.enable("svc").await.expect_err("refused"), problem);
    // Reported once: nothing more of it while it stays failed.
    let _ = workspace.disable("svc").await;
    let _ = workspace.list().await;
    loop {
        match events.try_recv() {
            Ok(HostEvent::WorkspaceFailed { .. } | HostEvent::WorkspaceRestarted { .. }) => {
                panic!("the failure was reported again")
            }
            Ok(_) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => break,
        }
    }
    // Opening it again by name starts it afresh, and the old handle follows.
    let again = host.workspace("w").await.expect("opened again");
    let snapshot = workspace
        .wait_for(BOUND, |snapshot| ready(snapshot, &["svc"]))
        .await;
    assert!(ready(&snapshot, &["svc"]), "{snapshot:?}");
    assert_eq!(workspace.failure(), None);
    for handle in [&workspace, &again] {
        let echoed = handle
            .call_tool(
                "svc",
                "echo",
                json!({"text": "back"}),
                CallOptions::default(),
            )
            .await
            .expect("echo");
        assert_eq!(echoed.text(), "back");
    }
    shutdown_clean(host).await;
}

/// A store whose writes fail while `failing` is set, as a full disk would.
#[derive(Default)]
struct Flaky {
    inner: MemoryStore,
    failing: std::sync::atomic::AtomicBool,
}

impl Store for Flaky {
    fn load(&self) -> StoreFuture<'_, BTreeMap<String, WorkspaceRecord>> {
        self.inner.load()
    }
    fn load_workspace<'a>(&'a self, workspace: &'a str) -> StoreFuture<'a, WorkspaceRecord> {
        self.inner.load_workspace(workspace)
    }
    fn write<'a>(
        &'a self,
        workspace: &'a str,
        change: &'a Change,
        expect: Expect,
    ) -> StoreFuture<'a, Version> {
        if self.failing.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::Corrupt {
                path: "flaky".into(),
                reason: "cannot be written just now".into(),
            })));
        }
        self.inner.write(workspace, change, expect)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_written_refuses_an_enable_and_stops_nothing_running() {
    let store = Arc::new(Flaky::default());
    let host = Host::start_with(
        config(&[
            ("PLURNK_MCP_ENABLED", "[]"),
            ("PLURNK_MCP_OTHER", EXE),
            ("PLURNK_MCP_OTHER_ARGS", r#"["fixture", "--name", "other"]"#),
        ]),
        HostOptions::default()
            .with_store(Some(store.clone()))
            .with_restart(
                RestartPolicy::default()
                    .with_min_delay(std::time::Duration::from_millis(50))
                    .with_max_delay(std::time::Duration::from_millis(500)),
            ),
    )
    .await
    .expect("host starts");
    let workspace = host.workspace("w").await.expect("workspace");
    workspace.enable("svc").await.expect("enable");
    store.failing.store(true, Ordering::SeqCst);
    // An enable that cannot be made durable is refused, and changes nothing: once its
    // candidate has gone (the next commit), the server is still listed, disabled.
    let before = workspace.snapshot().version;
    let refused = workspace.enable("other").await;
    let Err(problem) = &refused else {
        panic!("an enable that cannot be saved is refused: {refused:?}");
    };
    assert!(problem.detail.contains("could not be saved"), "{problem:?}");
    // (The refused candidate published nothing: the next commit is its detach.)
    let after = workspace.wait_for(BOUND, |s| s.version > before).await;
    assert!(
        after.version > before,
        "the candidate's detach was never committed"
    );
    assert_eq!(
        after.server("other").map(|s| s.state),
        Some(ServerState::Disabled)
    );
    assert_eq!(summary_of(&workspace, "other").await.alias, "other");
    // A server already enabled that reconnects writes nothing, so it comes back.
    let pid = pid_of(&workspace, "svc").await;
    // SAFETY: a signal to the process the host spawned.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let back = workspace
        .wait_for(BOUND, |s| {
            s.server("svc")
                .is_some_and(|s| s.state == ServerState::Ready && s.generation == 2)
        })
        .await;
    assert_eq!(
        back.server("svc").map(|s| (s.state, s.generation)),
        Some((ServerState::Ready, 2)),
        "the reconnected server was stopped for a write it did not need"
    );
    store.failing.store(false, Ordering::SeqCst);
    shutdown_clean(host).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_session_answers_for_it_while_the_snapshot_lags_behind() {
    // Calls go to a server's session, not through the workspace: while the workspace actor
    // is busy (here, held by a test lever, as a long handler would hold it), the published
    // snapshot lags, and the session alone knows the server changed its tools, lost its
    // process or lost its attachment.
    let store = Arc::new(Flaky::default());
    let host = Host::start_with(
        config(&[
            ("PLURNK_MCP_ENABLED", r#"["svc", "other"]"#),
            (
                "PLURNK_MCP_SVC_ARGS",
                r#"["fixture", "--name", "svc", "--legacy"]"#,
            ),
            ("PLURNK_MCP_OTHER", EXE),
            ("PLURNK_MCP_OTHER_ARGS", r#"["fixture", "--name", "other"]"#),
            ("PLURNK_MCP_THIRD", EXE),
            ("PLURNK_MCP_THIRD_ARGS", r#"["fixture", "--name", "third"]"#),
        ]),
        HostOptions::default().with_store(Some(store.clone())),
    )
    .await
    .expect("host starts");
    let workspace = host.workspace("w").await.expect("workspace");
    workspace.enable("third").await.expect("enable");
    let call = |alias: &'static str, tool: &'static str, arguments: serde_json::Value| {
        let workspace = workspace.clone();
        async move {
            workspace
                .call_tool(alias, tool, arguments, CallOptions::default())
                .await
        }
    };
    fn has_extra(snapshot: &plurnk_mcp::WorkspaceSnapshot) -> bool {
        snapshot
            .server("svc")
            .is_some_and(|s| s.tools.iter().any(|t| t.name == "extra"))
    }
    call("svc", "announce", json!({})).await.expect("announce");
    assert!(has_extra(&*workspace.wait_for(BOUND, has_extra).await));
    let other_pid = pid_of(&workspace, "other").await;

    // The workspace actor is held busy (until released, or until this test fails and drops
    // the release), and a disable waits in its mailbox behind it.
    let (release, held) = tokio::sync::oneshot::channel::<()>();
    assert!(
        workspace.stall_for_test(held).await,
        "the actor was never held"
    );
    let disabling = tokio::spawn({
        let workspace = workspace.clone();
        async move { workspace.disable("third").await }
    });
    let deadline = std::time::Instant::now() + BOUND;

    // 1. The server takes `extra` out: once the attachment has listed again, its session
    // refuses the tool, though the snapshot still lists it.
    call("svc", "announce", json!({"retract": true}))
        .await
        .expect("announce");
    loop {
        match call("svc", "extra", json!({})).await {
            Err(CallError::UnknownTool { tool, .. }) if tool == "extra" => break,
            Ok(_) => assert!(
                std::time::Instant::now() < deadline,
                "the session kept the retracted tool"
            ),
            Err(other) => panic!("a call of the retracted tool: {other:?}"),
        }
    }
    assert!(has_extra(&workspace.snapshot()), "the snapshot still lags");

    // 2. The other server's process dies: its session refuses calls as not ready.
    // SAFETY: a signal to the process the host spawned.
    unsafe {
        libc::kill(other_pid, libc::SIGKILL);
    }
    loop {
        match call("other", "echo", json!({"text": "x"})).await {
            Err(CallError::NotReady { state, .. }) => {
                assert_eq!(state, ServerState::Unavailable);
                break;
            }
            // Before the loss is noticed a call may still go out, and be lost with it.
            Ok(_) | Err(CallError::ConnectionLost { .. }) => assert!(
                std::time::Instant::now() < deadline,
                "the session of a dead server still takes calls"
            ),
            Err(other) => panic!("a call of a dead server: {other:?}"),
        }
    }
    assert_eq!(
        workspace.snapshot().server("other").map(|s| s.state),
        Some(ServerState::Ready),
        "the snapshot still lags"
    );

    // 3. The svc attachment fails: its session says so at once.
    assert!(workspace.crash_attachment_for_test("svc"));
    loop {
        match call("svc", "echo", json!({"text": "x"})).await {
            Err(CallError::Closing { reason, .. }) => {
                assert!(reason.contains("attachment stopped"), "{reason}");
                break;
            }
            Ok(_) | Err(CallError::ConnectionLost { .. }) => assert!(
                std::time::Instant::now() < deadline,
                "the session of a failed attachment still takes calls"
            ),
            Err(other) => panic!("a call of a failed attachment: {other:?}"),
        }
    }

    // The workspace goes on: the disable completes, and both servers come back.
    drop(release);
    let disabled = disabling.await.expect("joined").expect("disabled");
    assert_eq!(disabled.state, ServerState::Disabled);
    let back = workspace
        .wait_for(BOUND, |s| {
            ["svc", "other"].iter().all(|alias| {
                s.server(alias)
                    .is_some_and(|s| s.state == ServerState::Ready)
            })
        })
        .await;
    assert!(!has_extra(&back), "the committed catalog has no extra");
    assert_eq!(
        call("other", "echo", json!({"text": "back"}))
            .await
            .expect("echo")
            .text(),
        "back"
    );
    shutdown_clean(host).await;
}

/// A daemon's own actor: it tells the test what supervision says of its children, and
/// passes on the host events it is sent.
struct Daemon;

enum DaemonMsg {
    Event(HostEvent),
}

type Heard = tokio::sync::mpsc::UnboundedSender<(ractor::ActorId, &'static str)>;
type Told = tokio::sync::mpsc::UnboundedSender<HostEvent>;

impl ractor::Actor for Daemon {
    type Msg = DaemonMsg;
    type State = (Heard, Told);
    type Arguments = (Heard, Told);

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        DaemonMsg::Event(event): Self::Msg,
        (_, told): &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        let _ = told.send(event);
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        event: ractor::SupervisionEvent,
        (heard, _): &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        // Kept running whatever its child does, so one daemon hears every host it starts.
        match event {
            ractor::SupervisionEvent::ActorTerminated(cell, _, _) => {
                let _ = heard.send((cell.get_id(), "terminated"));
            }
            ractor::SupervisionEvent::ActorFailed(cell, _) => {
                let _ = heard.send((cell.get_id(), "failed"));
            }
            _ => {}
        }
        Ok(())
    }
}

async fn heard(
    heard: &mut tokio::sync::mpsc::UnboundedReceiver<(ractor::ActorId, &'static str)>,
) -> (ractor::ActorId, &'static str) {
    tokio::time::timeout(BOUND, heard.recv())
        .await
        .expect("the parent heard of its child in time")
        .expect("the daemon is running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_started_under_a_daemon_actor_is_supervised_and_managed_by_message() {
    use plurnk_mcp::HostMsg;
    let (heard_tx, mut heard_rx) = tokio::sync::mpsc::unbounded_channel();
    let (told_tx, mut told_rx) = tokio::sync::mpsc::unbounded_channel();
    let (daemon, daemon_task) = ractor::Actor::spawn(None, Daemon, (heard_tx, told_tx))
        .await
        .expect("the daemon starts");
    let linked = || HostOptions::default().with_parent(Some(daemon.get_cell()));

    // Linked: the daemon hears the host's root end when the host shuts down.
    let host = Host::start_with(config(&[]), linked())
        .await
        .expect("host starts");
    host.events_to(daemon.clone(), |event| Some(DaemonMsg::Event(event)));
    let root = host.actor();
    // Enable and disable by message, as a daemon actor's `handle` would.
    let disabled = ractor::call!(root, |reply| HostMsg::Disable {
        workspace: "default".into(),
        alias: "svc".into(),
        reply,
    })
    .expect("the root answers")
    .expect("disabled");
    assert_eq!(disabled.state, ServerState::Disabled);
    // The events arrive at the actor as its own messages.
    let told = tokio::time::timeout(BOUND, async {
        while let Some(event) = told_rx.recv().await {
            if let HostEvent::StateChanged {
                alias,
                to: ServerState::Disabled,
                ..
            } = &event
                && alias == "svc"
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(told, Ok(true), "the daemon was told of the disable");
    let mut watch = ractor::call!(root, |reply| HostMsg::Subscribe {
        workspace: "default".into(),
        reply,
    })
    .expect("the root answers")
    .expect("a subscription");
    let enabled = ractor::call!(root, |reply| HostMsg::Enable {
        workspace: "default".into(),
        alias: "svc".into(),
        customize: Box::default(),
        reply,
    })
    .expect("the root answers")
    .expect("enabled");
    assert_eq!(enabled.state, ServerState::Ready);
    let seen = tokio::time::timeout(BOUND, async {
        loop {
            let snapshot = watch.changed().await.expect("the host runs");
            if ready(&snapshot, &["svc"]) {
                return snapshot;
            }
        }
    })
    .await
    .expect("the subscription saw the server come back");
    let snapshot = ractor::call!(root, |reply| HostMsg::Snapshot {
        workspace: "default".into(),
        reply,
    })
    .expect("the root answers")
    .expect("a snapshot");
    assert!(snapshot.version >= seen.version);
    // A message naming a workspace that is not open opens it; a bad name says what is wrong.
    let listed = ractor::call!(root, |reply| HostMsg::List {
        workspace: "by-message".into(),
        client: Vec::new(),
        reply,
    })
    .expect("the root answers")
    .expect("listed");
    assert!(listed.iter().any(|summary| summary.alias == "svc"));
    assert!(
        host.workspace_names()
            .await
            .contains(&"by-message".to_owned())
    );
    let bad = ractor::call!(root, |reply| HostMsg::Disable {
        workspace: "no spaces".into(),
        alias: "svc".into(),
        reply,
    })
    .expect("the root answers")
    .expect_err("refused");
    assert!(
        bad.detail
            .contains("workspace name \"no spaces\" is not valid"),
        "{bad}"
    );
    let root_id = root.get_id();
    shutdown_clean(host).await;
    assert_eq!(heard(&mut heard_rx).await, (root_id, "terminated"));

    // And it hears the root fail; the servers go with it.
    let host = Host::start_with(config(&[]), linked())
        .await
        .expect("host starts");
    let pid = pid_of(&host.default_workspace(), "svc").await;
    let root_id = host.actor().get_id();
    assert!(host.crash_root_for_test());
    assert_eq!(heard(&mut heard_rx).await, (root_id, "failed"));
    wait_gone(pid, "the failed root's server").await;
    let refused = host
        .default_workspace()
        .disable("svc")
        .await
        .expect_err("no root to answer");
    assert!(
        refused.detail.contains("root actor has stopped"),
        "{refused}"
    );
    let _ = host.shutdown().await;
    daemon.stop(None);
    daemon_task.await.expect("the daemon stopped");
}

/// The install gate closes behind itself: a server added, and a declared one customized,
/// while the operator allowed it are kept but not connected once the gate is closed (403
/// `install-gate-closed`, saying why and what to do), refuse an enable meanwhile, and come
/// back as they were when the gate opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_the_gate_let_in_stay_out_once_it_closes_and_come_back_when_it_opens() {
    let dir = scratch("gate");
    let db = dir.join("state.sqlite");
    let host = start(&db, config(&[])).await;
    let workspace = host.default_workspace();
    let added = workspace
        .add(fixture_definition("extra", "extra"))
        .await
        .expect("added while the gate is open");
    assert_eq!(added.state, ServerState::Ready);
    let customized = workspace
        .enable_with("svc", renamed_fixture("renamed"))
        .await
        .expect("customized while the gate is open");
    assert_eq!(customized.state, ServerState::Ready);
    shutdown_clean(host).await;

    let closed = start(&db, config(&[("PLURNK_MCP_ALLOW_ADD", "false")])).await;
    let workspace = closed.default_workspace();
    let snapshot = workspace.snapshot();
    // A declared server is always honoured: customized while the gate was open, it runs as
    // the operator declared it once the gate is closed, and is enabled as such.
    let declared = snapshot.server("svc").expect("declared");
    assert_eq!(declared.state, ServerState::Ready, "{:?}", declared.problem);
    assert_eq!(
        declared.negotiated.as_ref().and_then(|n| n.name.as_deref()),
        Some("svc"),
        "the declared definition, not the customization"
    );
    workspace.disable("svc").await.expect("disable");
    let enabled = workspace
        .enable("svc")
        .await
        .expect("a declared server enables");
    assert_eq!(enabled.state, ServerState::Ready);
    for (alias, how) in [("extra", "added")] {
        let server = snapshot.server(alias).expect("kept");
        assert_eq!(server.state, ServerState::Unavailable, "{alias}");
        let problem = server.problem.as_ref().expect("a Problem");
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (403, "install-gate-closed"),
            "{alias}"
        );
        assert!(
            problem.detail.contains(how) && problem.detail.contains("PLURNK_MCP_ALLOW_ADD"),
            "{alias}: {}",
            problem.detail
        );
        let refused = workspace
            .enable(alias)
            .await
            .expect_err("the gate is closed");
        assert_eq!(refused.kind, "install-gate-closed", "{alias}");
    }
    shutdown_clean(closed).await;

    let open = start(&db, config(&[])).await;
    let snapshot = open.default_workspace().snapshot();
    for alias in ["extra", "svc"] {
        assert_eq!(
            snapshot.server(alias).map(|s| s.state),
            Some(ServerState::Ready),
            "{alias} is back"
        );
    }
    // The customization rested in the store while the gate was closed, and is back.
    assert_eq!(
        snapshot
            .server("svc")
            .and_then(|s| s.negotiated.as_ref())
            .and_then(|n| n.name.as_deref()),
        Some("renamed")
    );
    shutdown_clean(open).await;
}

/// `count` in-process fixture servers, `mem-0` to `mem-{count - 1}`: no process each, so a
/// workspace of thousands starts in a test.
fn in_process_fixtures(count: usize) -> BTreeMap<String, plurnk_mcp::InProcessConnector> {
    let connector: plurnk_mcp::InProcessConnector = Arc::new(|| {
        let (host_end, server_end) = tokio::io::duplex(64 * 1024);
        let (read, write) = tokio::io::split(server_end);
        tokio::spawn(plurnk_mcp_fixture::serve_io(
            read,
            write,
            plurnk_mcp_fixture::FixtureOptions::default(),
        ));
        host_end
    });
    (0..count)
        .map(|i| (format!("mem-{i}"), connector.clone()))
        .collect()
}

/// A commit copies nothing it did not change: after one server is disabled, the snapshot
/// committed shares every other server with the snapshot before it (the same allocation,
/// not an equal copy), and the one changed is new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_after_one_change_shares_every_other_server_with_the_snapshot_before() {
    let options = HostOptions::default().with_in_process(in_process_fixtures(64));
    let host = Host::start_with(HostConfig::default(), options)
        .await
        .expect("host starts");
    let workspace = host.default_workspace();
    let before = workspace.snapshot();
    assert_eq!(before.servers.count(ServerState::Ready), 64);
    workspace.disable("mem-17").await.expect("disable");
    let after = workspace.snapshot();
    assert!(after.version > before.version, "a commit happened");
    assert_eq!(
        after.server("mem-17").map(|server| server.state),
        Some(ServerState::Disabled)
    );
    for (alias, server) in before.servers.iter() {
        let shared = after
            .servers
            .get(alias)
            .is_some_and(|now| Arc::ptr_eq(server, now));
        assert_eq!(shared, alias != "mem-17", "{alias} shared: {shared}");
    }
    assert_eq!(after.servers.count(ServerState::Ready), 63);
    shutdown_clean(host).await;
}
