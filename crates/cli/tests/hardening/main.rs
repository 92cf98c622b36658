//! What an attacker tries against every surface of the host, and the guard each meets: a
//! model's values, a client's connections and sessions, a database at the store's address,
//! a file `import` reads, a document behind a proxy, text a server writes. Each test fails
//! when the guard it names is removed (TESTING.md's guard table says how each was broken).
//!
//! # Layout
//! One binary, a module per surface; this file holds the setup they share.
//! - `sources`: a model's values for a CLI adapter, and a script's header and path.
//! - `import`: a client's file read into definitions, and what `add` keeps.
//! - `text`: names a caller gives and text a server writes, as they come back.
//! - `gateway`: a load balancer's checks, and one client's share of the connections.
//! - `metrics`: the Prometheus endpoint's listener.
//! - `proxy`: the address rule behind the proxy the environment names.
//! - `state`: where workspace state lives, as the command line is given it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use plurnk_mcp::sources::SourceKind;
use plurnk_mcp::store::SqliteStore;
use plurnk_mcp::{Host, HostConfig, HostOptions, ServerDefinition};
use serde_json::Value;

#[path = "../support/calls.rs"]
mod calls;
#[path = "../support/env.rs"]
mod env;
#[path = "../support/http.rs"]
mod http;
#[path = "../support/http_fixture.rs"]
mod http_fixture;
#[path = "../support/processes.rs"]
mod processes;
#[path = "../support/served.rs"]
mod served;
#[path = "../support/wait.rs"]
mod wait;

mod gateway;
mod import;
mod metrics;
mod proxy;
mod sources;
mod state;
mod text;

use env::EXE;
use http_fixture::HttpFixture;

/// The configuration of exactly these variables.
fn config(pairs: &[(&str, String)]) -> HostConfig {
    env::checked(env::map(pairs))
}

/// A fresh folder of this test run, named `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hardening-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The definition of a tool source read from `declaration`, as a file at `origin` holds it.
fn source(alias: &str, kind: SourceKind, declaration: Value, origin: &Path) -> ServerDefinition {
    match plurnk_mcp::sources::definition(alias, kind, declaration, &origin.display().to_string()) {
        Ok(definition) => definition,
        Err(errors) => panic!("{alias}: {errors}"),
    }
}

/// A host that lets workspaces add servers, its state in `store`.
async fn host_on(store: &Path) -> Host {
    let store = SqliteStore::open(store).expect("state file");
    let options = HostOptions::default().with_store(Some(Arc::new(store)));
    Host::start_with(
        config(&[
            ("PLURNK_MCP_ALLOW_ADD", "true".into()),
            ("PLURNK_MCP_CONNECT_TIMEOUT", "30000".into()),
        ]),
        options,
    )
    .await
    .expect("host starts")
}

/// A fresh state file's path.
fn scratch_state(name: &str) -> String {
    scratch(name).join("state.sqlite").display().to_string()
}

/// `plurnk-mcp ARGS` with exactly `vars` (and `PATH` and `HOME`), run to its end.
fn run(args: &[&str], vars: &BTreeMap<String, String>) -> Output {
    let mut command = Command::new(EXE);
    command.args(args).env_clear();
    for key in ["PATH", "HOME"] {
        if let Ok(value) = std::env::var(key) {
            command.env(key, value);
        }
    }
    command
        .envs(vars)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("plurnk-mcp runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
