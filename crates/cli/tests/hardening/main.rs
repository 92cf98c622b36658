//! What an attacker tries against every surface of the host, and the guard each meets: a
//! model's values, a client's connections and sessions, a database at the store's address,
//! a file `import` reads, a document behind a proxy, text a server writes. Each test fails
//! when the guard it names is removed (TESTING.md's guard table says how each was broken).
//!
//! # Layout
//! One binary, a module per surface; this file holds the setup they share.
//! - `sources`: a model's values for a CLI adapter, and a script's header and path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use plurnk_mcp::sources::SourceKind;
use plurnk_mcp::store::SqliteStore;
use plurnk_mcp::{Host, HostConfig, HostOptions, ServerDefinition};
use serde_json::Value;

#[path = "../support/calls.rs"]
mod calls;
#[path = "../support/env.rs"]
mod env;
#[path = "../support/wait.rs"]
mod wait;

mod sources;

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
