//! Workspaces: actions, the cascade, durable state across a restart, workspace independence,
//! a store whose writes fail, supervision, the install gate.
//!
//! # Layout
//! One binary, a module per behaviour; this file holds the setup they share.
//! - `actions`: add, enable, customize and remove, and the Problem each answers with.
//! - `durable`: state across a restart, a foreign or newer file, two hosts on one file, a
//!   store that cannot be written.
//! - `gate`: the install gate, literal credentials.
//! - `supervision`: failed workspaces, a daemon actor, a session while the snapshot lags,
//!   commits that share what they did not change, one workspace never delaying another.

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

#[path = "../support/calls.rs"]
mod calls;
#[path = "../support/env.rs"]
mod env;
#[path = "../support/wait.rs"]
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

fn ready(snapshot: &plurnk_mcp::WorkspaceSnapshot, aliases: &[&str]) -> bool {
    aliases.iter().all(|alias| {
        snapshot
            .server(alias)
            .is_some_and(|server| server.state == ServerState::Ready)
    })
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

enum DaemonMsg {
    Event(HostEvent),
}

type Heard = tokio::sync::mpsc::UnboundedSender<(ractor::ActorId, &'static str)>;
type Told = tokio::sync::mpsc::UnboundedSender<HostEvent>;

async fn heard(
    heard: &mut tokio::sync::mpsc::UnboundedReceiver<(ractor::ActorId, &'static str)>,
) -> (ractor::ActorId, &'static str) {
    tokio::time::timeout(BOUND, heard.recv())
        .await
        .expect("the parent heard of its child in time")
        .expect("the daemon is running")
}

mod actions;
mod durable;
mod gate;
mod supervision;
