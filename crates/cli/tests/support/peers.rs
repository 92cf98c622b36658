//! Paths of the third-party peers, installed once per test binary by the project's own
//! `scripts/install-peers.sh` (idempotent; a second run only checks its stamps).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where each peer lives.
pub struct Peers {
    /// Node 22.
    pub node: String,
    /// `@modelcontextprotocol/server-everything`'s entry point.
    pub everything: String,
    /// The virtualenv's Python with `mcp==2.3.0`.
    pub python: String,
    /// `tests/peers/python_server.py`.
    pub python_peer: String,
}

/// The repository's root (the folder holding `Cargo.lock`, from either package's tests): the
/// peers install into its `.cache/`.
fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|folder| folder.join("Cargo.lock").exists())
        .unwrap_or(manifest)
        .to_owned()
}

/// Installs (if needed) and locates the peers.
pub fn peers() -> &'static Peers {
    static PEERS: OnceLock<Peers> = OnceLock::new();
    PEERS.get_or_init(|| {
        let script = root().join("scripts/install-peers.sh");
        let status = Command::new("bash")
            .arg(&script)
            .status()
            .expect("bash runs the install script");
        assert!(status.success(), "scripts/install-peers.sh failed");
        let env = std::fs::read_to_string(root().join(".cache/peers.env"))
            .expect("install-peers.sh writes .cache/peers.env");
        let value = |key: &str| {
            env.lines()
                .find_map(|line| line.strip_prefix(&format!("{key}=")))
                .map(|v| v.trim_matches(['\'', '"']).to_owned())
                .unwrap_or_else(|| panic!("{key} missing from peers.env"))
        };
        let peers = Peers {
            node: value("NODE22"),
            everything: value("SERVER_EVERYTHING"),
            python: value("PYTHON_MCP"),
            python_peer: value("PYTHON_PEER"),
        };
        for path in [
            &peers.node,
            &peers.everything,
            &peers.python,
            &peers.python_peer,
        ] {
            assert!(Path::new(path).exists(), "{path} is missing");
        }
        peers
    })
}

/// A file of `crates/cli/tests/peers/`.
#[allow(dead_code)]
pub fn peer_script(name: &str) -> String {
    root()
        .join("crates/cli/tests/peers")
        .join(name)
        .to_string_lossy()
        .into_owned()
}
