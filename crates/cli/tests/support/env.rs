//! A host's configuration as the tests write it: a map of variables (never the process's own
//! environment), the variables of a fixture server, and the map checked into a `HostConfig`.

#![allow(dead_code)]

use std::collections::BTreeMap;

use plurnk_mcp::HostConfig;
use serde_json::json;

/// The command line, which is also the fixture server (`plurnk-mcp fixture`): Cargo names it
/// to the command line's own tests; the library's (the repository's top-level `tests/`) take
/// the one the workspace's test run (`cargo test --workspace`) builds in the same target
/// directory.
pub const EXE: &str = match option_env!("CARGO_BIN_EXE_plurnk-mcp") {
    Some(exe) => exe,
    None => concat!(env!("CARGO_TARGET_TMPDIR"), "/../debug/plurnk-mcp"),
};

/// The repository's root (the folder holding `Cargo.lock`), from either package's tests.
pub fn repository() -> std::path::PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .ancestors()
        .find(|folder| folder.join("Cargo.lock").exists())
        .unwrap_or(manifest);
    root.canonicalize().unwrap_or_else(|_| root.to_owned())
}

/// The variable that names server `alias`: `PLURNK_MCP_<ALIAS>`, as the configuration spells it.
fn prefix(alias: &str) -> String {
    format!(
        "PLURNK_MCP_{}",
        alias.to_ascii_uppercase().replace('-', "_")
    )
}

/// The variables of fixture server `alias` over stdio (`extra` are fixture flags such as
/// `--legacy` or `--probe ADDR`).
pub fn fixture(alias: &str, extra: &[&str]) -> Vec<(String, String)> {
    let mut args = vec!["fixture", "--name", alias];
    args.extend_from_slice(extra);
    let prefix = prefix(alias);
    vec![
        (prefix.clone(), EXE.to_owned()),
        (format!("{prefix}_ARGS"), json!(args).to_string()),
    ]
}

/// The map of these variables.
pub fn map(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), value.clone()))
        .collect()
}

/// The host-wide sandbox policy of the suite's servers, which it starts through shell
/// wrappers and points at its own files: beyond the default, the repository is readable (the
/// binaries, the peers' scripts, `.cache`) and `target/tmp` and the system's temporary
/// directory writable. The sandbox's own tests
/// run under the default itself.
pub fn harness_sandbox() -> String {
    let root = repository();
    let tmp = env!("CARGO_TARGET_TMPDIR");
    let _ = std::fs::create_dir_all(tmp);
    json!({"read": [root], "write": [tmp, std::env::temp_dir()]}).to_string()
}

/// The configuration read from `map`, under [`harness_sandbox`] unless the map sets a
/// sandbox policy of its own; panics naming every fault, as the host reports them.
pub fn checked(mut map: BTreeMap<String, String>) -> HostConfig {
    assert!(
        std::path::Path::new(EXE).exists(),
        "the fixture server {EXE} is not built: run the workspace's tests (`cargo test \
         --workspace`), or build it first (`cargo build -p plurnk-mcp-cli`)"
    );
    map.entry("PLURNK_MCP_SANDBOX".to_owned())
        .or_insert_with(harness_sandbox);
    match HostConfig::from_env(map) {
        Ok(config) => config,
        Err(errors) => panic!("test configuration is invalid: {errors}"),
    }
}

/// The configuration of these variables with a connect timeout of `connect_ms`: generous,
/// since a third-party peer (Node, Python) can take seconds to start on a busy machine.
pub fn connecting_within(connect_ms: u64, pairs: &[(&str, String)]) -> HostConfig {
    let mut map = map(pairs);
    map.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), connect_ms.to_string());
    checked(map)
}

/// A configuration map under construction, for tests that build one server at a time.
pub struct Env(BTreeMap<String, String>);

impl Env {
    /// Connect and request timeouts of 10 s: guards only a hung server reaches.
    pub fn new() -> Self {
        let mut map = BTreeMap::new();
        map.insert("PLURNK_MCP_CONNECT_TIMEOUT".into(), "10000".into());
        map.insert("PLURNK_MCP_REQUEST_TIMEOUT".into(), "10000".into());
        Env(map)
    }

    pub fn set(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }

    /// A fixture server over stdio (`extra` are fixture flags such as `--legacy`).
    pub fn stdio(mut self, alias: &str, extra: &[&str]) -> Self {
        self.0.extend(fixture(alias, extra));
        self
    }

    /// A fixture server over stdio that reports to `probe` (and serves `gate`).
    pub fn probed(
        self,
        alias: &str,
        probe: &plurnk_mcp_fixture::probe::Probe,
        extra: &[&str],
    ) -> Self {
        let mut flags = vec!["--probe", probe.address()];
        flags.extend_from_slice(extra);
        self.stdio(alias, &flags)
    }

    pub fn enable(self, aliases: &[&str]) -> Self {
        self.set("PLURNK_MCP_ENABLED", json!(aliases).to_string())
    }

    pub fn config(self) -> HostConfig {
        checked(self.0)
    }
}
