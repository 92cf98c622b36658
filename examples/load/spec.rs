//! What one trial runs and what it reports; trials run in a fresh child process each.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The clients compared side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Client {
    /// plurnk-mcp's `Host` API (the actor tree over rmcp).
    Host,
    /// rmcp 3.11 used directly: `ClientLifecycleMode::Auto` over `TokioChildProcess`.
    Rmcp,
    /// The official TypeScript v2 client on Node 22, driven by bench/ts-client.cjs.
    Ts,
    /// A hand-written JSON-RPC line loop over the same pipe: the floor.
    Bare,
    /// The host exporting its spans over OTLP to a live receiver (feature `otel`).
    #[serde(rename = "host-otel")]
    HostOtel,
    /// The host exporting to a collector that is down (its port refuses connections).
    #[serde(rename = "host-otel-down")]
    HostOtelDown,
}

impl Client {
    pub const ALL: [Client; 4] = [Client::Host, Client::Rmcp, Client::Ts, Client::Bare];

    pub fn name(self) -> &'static str {
        match self {
            Client::Host => "host",
            Client::Rmcp => "rmcp",
            Client::Ts => "ts",
            Client::Bare => "bare",
            Client::HostOtel => "host-otel",
            Client::HostOtelDown => "host-otel-down",
        }
    }

    pub fn parse(name: &str) -> Option<Client> {
        Client::ALL
            .into_iter()
            .chain([Client::HostOtel, Client::HostOtelDown])
            .find(|client| client.name() == name)
    }
}

/// One workload at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Workload {
    /// `n` echo calls, `c` in flight, call i to server i % `servers`, after `warmup`
    /// sequential calls. `c = 1, servers = 1` is the sequential workload.
    Calls {
        n: usize,
        c: usize,
        servers: usize,
        warmup: usize,
        /// Raw rmcp only: advertise the host's client identity and capabilities instead of
        /// rmcp's defaults. rmcp serializes both into every request's `_meta` (2026-07-28
        /// is stateless), so this row shows what carrying them costs any rmcp client.
        #[serde(default)]
        host_identity: bool,
    },
    /// `servers` stdio servers connected at once: spawned, negotiated, tools listed.
    Hydrate {
        servers: usize,
        /// TypeScript only: "auto" (the SDK's sibling probe) or "inplace".
        #[serde(default)]
        ts_mode: Option<String>,
    },
    /// `servers` in-process servers over `tokio::io::duplex`, no child processes.
    InProcess { servers: usize },
    /// The calls workload on `servers` servers while they are disabled and re-enabled in turn.
    Churn { n: usize, c: usize, servers: usize },
    /// `servers` in-process servers, then one of them disabled and enabled again `toggles`
    /// times: the commit latency of one change in a workspace of that size.
    Toggle { servers: usize, toggles: usize },
}

/// Everything a trial child needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialSpec {
    pub client: Client,
    pub workload: Workload,
    pub fixture: PathBuf,
    pub node: PathBuf,
    pub ts_dir: PathBuf,
    pub ts_driver: PathBuf,
    /// The live OTLP receiver the `host-otel` client exports to.
    #[serde(default)]
    pub otlp: Option<String>,
}

/// What a trial child prints as its one stdout line.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrialResult {
    /// `None` when it ran; the reason otherwise.
    pub error: Option<String>,
    /// Figures by name (see `trial.rs` for the names and units).
    pub metrics: BTreeMap<String, f64>,
    /// The protocol revisions the connections negotiated.
    pub revisions: Vec<String>,
    /// Free-form remarks (versions, counts).
    pub notes: Vec<String>,
}

impl TrialResult {
    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            error: Some(error.into()),
            ..Self::default()
        }
    }

    pub fn set(&mut self, name: &str, value: f64) {
        self.metrics.insert(name.to_owned(), value);
    }
}
