//! An optional Prometheus endpoint for the host's metrics: [`serve`] installs the process's
//! global [`metrics`] recorder and answers `GET /metrics` in the text exposition format.
//!
//! The host records through the `metrics` facade whether or not this endpoint runs; an
//! embedder that has a recorder of its own installs that one instead and never calls
//! [`serve`]. Labels stay few and bounded: an outcome, an error kind, a state, a workspace
//! name; never an alias, a tool, an argument or anything a server sent.
//!
//! | metric | type | labels | counts |
//! |---|---|---|---|
//! | `plurnk_mcp_calls_total` | counter | `outcome` | calls answered: `ok`, `tool-error`, `timeout`, `cancelled`, `overloaded`, `error` |
//! | `plurnk_mcp_call_errors_total` | counter | `kind` | calls failed or refused, by [`CallError::kind`](crate::CallError::kind) |
//! | `plurnk_mcp_call_seconds` | histogram | | seconds a call spent on its server, admission to answer |
//! | `plurnk_mcp_state_changes_total` | counter | `to` | server state changes, by the state entered |
//! | `plurnk_mcp_commits_total` | counter | | workspace snapshots committed |
//! | `plurnk_mcp_reconnects_total` | counter | | connections made again after a server was lost |
//! | `plurnk_mcp_restarts_total` | counter | | lost connections and crashed attachments |
//! | `plurnk_mcp_attachments` | gauge | `workspace`, `state` | servers of a workspace in each state |
//! | `plurnk_mcp_workspace_failures_total` | counter | | workspace actors that failed |
//! | `plurnk_mcp_notifications_dropped_total` | counter | | server notifications dropped by the flood guard |
//! | `plurnk_mcp_server_requests_dropped_total` | counter | | server requests dropped past their bound |
//! | `plurnk_mcp_sandbox_kills_total` | counter | `cause` | sandboxed processes ended by a limit: `memory`, `processes`, `files`, `cpu` |
//! | `plurnk_mcp_gateway_connections` | gauge | | connections open to the process's gateways |
//! | `plurnk_mcp_gateway_sessions` | gauge | | 2025-11-25 sessions open on them |
//! | `plurnk_mcp_gateway_listen_streams` | gauge | | listen streams (`subscriptions/listen`, `GET`) open on them |
//! | `mcp_client_operation_duration_seconds` | histogram | `mcp_method_name`, `error_type` | the conventions' `mcp.client.operation.duration`: each request sent a server, admission to answer |
//! | `mcp_server_operation_duration_seconds` | histogram | `mcp_method_name`, `error_type` | the conventions' `mcp.server.operation.duration`: each request the gateway served |
//! | `plurnk_mcp_otel_spans_exported_total` | counter | | spans handed to the OTLP collector (feature `otel`) |
//! | `plurnk_mcp_otel_spans_dropped_total` | counter | `reason` | spans that never reached it: `queue-full` (a slow or absent collector), `export-failed` |
//!
//! The two `mcp_*` histograms are the OpenTelemetry semantic conventions' for MCP, under the
//! names an OTLP-to-Prometheus bridge gives them, with the conventions' buckets; their labels
//! are bounded (see [`crate::telemetry`]), never a tool's name.

use std::net::SocketAddr;

use metrics::{KeyName, SharedString, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

mod listener;

/// Why the endpoint is not served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrometheusError {
    /// The process already has a global `metrics` recorder (this endpoint's, or another).
    #[error(
        "a metrics recorder is already installed in this process: serve the Prometheus \
         endpoint once, or export through the recorder that is installed"
    )]
    AlreadyInstalled,
    /// The address could not be listened on.
    #[error(
        "cannot serve metrics on {address}: {source}: choose a free address, or port 0 to \
         have one picked"
    )]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Called outside a Tokio runtime, and the endpoint's own thread could not start.
    #[error("cannot start the thread that serves metrics: {0}")]
    Thread(#[source] std::io::Error),
}

/// The upper bounds of `plurnk_mcp_call_seconds`' buckets: from an in-process answer to a
/// tool that works for minutes.
const CALL_SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];

/// Installs the global `metrics` recorder and serves `GET /metrics` on `address`; returns
/// the address it listens on (port 0 asks for any free port, and this is the one given).
///
/// Inside a Tokio runtime the endpoint runs as a task of that runtime; outside one, on a
/// thread of its own. It runs as long as its runtime (or the process). A scrape's `Host`
/// must be a loopback name or an address ([`serve_allowing`] names more hosts); a request
/// head has 5 s to arrive, and past 16 connections at once the one that has waited longest
/// for its head is closed to make room (`prometheus/listener.rs`).
///
/// # Errors
///
/// [`PrometheusError::Bind`] if `address` cannot be listened on, and
/// [`PrometheusError::AlreadyInstalled`] if the process has a recorder already; nothing is
/// installed in either case.
pub fn serve(address: SocketAddr) -> Result<SocketAddr, PrometheusError> {
    serve_allowing(address, Vec::new())
}

/// As [`serve`], with `Host` names (or `host:port`) a scrape may also give: the names a
/// Prometheus server reaches this host by, when it does not scrape an address.
///
/// # Errors
///
/// As [`serve`].
pub fn serve_allowing(
    address: SocketAddr,
    allowed_hosts: Vec<String>,
) -> Result<SocketAddr, PrometheusError> {
    // Listening first: a failure here leaves the process without a recorder, free to try
    // another address; the recorder, once installed, cannot be taken back.
    let bind = |source| PrometheusError::Bind { address, source };
    let listener = std::net::TcpListener::bind(address).map_err(bind)?;
    let bound = listener.local_addr().map_err(bind)?;
    listener.set_nonblocking(true).map_err(bind)?;
    let runtime = match tokio::runtime::Handle::try_current() {
        Ok(handle) => Runtime::Caller(handle),
        Err(_) => Runtime::Own(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(PrometheusError::Thread)?,
        ),
    };
    let handle = builder()
        .install_recorder()
        // Setting the global recorder is the only way installing it fails.
        .map_err(|_| PrometheusError::AlreadyInstalled)?;
    describe();
    served_at_zero();
    let endpoint = listener::run(listener, handle, allowed_hosts);
    match runtime {
        Runtime::Caller(handle) => drop(handle.spawn(endpoint)),
        Runtime::Own(runtime) => {
            std::thread::Builder::new()
                .name("plurnk-mcp-metrics".into())
                .spawn(move || runtime.block_on(endpoint))
                .map_err(PrometheusError::Thread)?;
        }
    }
    tracing::info!(address = %bound, "serving Prometheus metrics on /metrics");
    Ok(bound)
}

/// Where the endpoint runs.
enum Runtime {
    /// The runtime `serve` was called in.
    Caller(tokio::runtime::Handle),
    /// A runtime of its own, on its own thread.
    Own(tokio::runtime::Runtime),
}

/// The recorder: `plurnk_mcp_call_seconds` as a histogram with buckets (which a server
/// fleet can aggregate), not the exporter's default summary.
fn builder() -> PrometheusBuilder {
    let buckets = [
        ("plurnk_mcp_call_seconds", CALL_SECONDS_BUCKETS),
        (
            "mcp_client_operation_duration_seconds",
            crate::telemetry::DURATION_BUCKETS,
        ),
        (
            "mcp_server_operation_duration_seconds",
            crate::telemetry::DURATION_BUCKETS,
        ),
    ];
    let mut builder = PrometheusBuilder::new();
    for (name, bounds) in buckets {
        // Refused only for no buckets at all, and each list is a non-empty constant.
        builder = match builder.set_buckets_for_metric(Matcher::Full(name.into()), bounds) {
            Ok(builder) => builder,
            Err(_) => PrometheusBuilder::new(),
        };
    }
    builder
}

/// A metric the host records, as the endpoint describes it (`# HELP`, `# TYPE`, the unit).
struct Described {
    name: &'static str,
    /// Its labels; one without any is served from the start, at zero.
    labels: &'static [&'static str],
    kind: Kind,
    unit: Option<Unit>,
    help: &'static str,
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric the host records: the module's table, in code.
const METRICS: [Described; 19] = [
    Described {
        name: "plurnk_mcp_calls_total",
        labels: &["outcome"],
        kind: Kind::Counter,
        unit: None,
        help: "calls the host answered, by outcome (ok, tool-error, timeout, cancelled, overloaded, error)",
    },
    Described {
        name: "plurnk_mcp_call_errors_total",
        labels: &["kind"],
        kind: Kind::Counter,
        unit: None,
        help: "calls that failed or were refused, by the kind of error",
    },
    Described {
        name: "plurnk_mcp_call_seconds",
        labels: &[],
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "time a call spent on its server, from admission to answer",
    },
    Described {
        name: "plurnk_mcp_state_changes_total",
        labels: &["to"],
        kind: Kind::Counter,
        unit: None,
        help: "server state changes, by the state entered",
    },
    Described {
        name: "plurnk_mcp_commits_total",
        labels: &[],
        kind: Kind::Counter,
        unit: None,
        help: "workspace snapshots committed",
    },
    Described {
        name: "plurnk_mcp_reconnects_total",
        labels: &[],
        kind: Kind::Counter,
        unit: None,
        help: "connections made again after a server was lost",
    },
    Described {
        name: "plurnk_mcp_restarts_total",
        labels: &[],
        kind: Kind::Counter,
        unit: None,
        help: "lost connections and crashed attachments, each followed by a reconnect",
    },
    Described {
        name: "plurnk_mcp_attachments",
        labels: &["workspace", "state"],
        kind: Kind::Gauge,
        unit: None,
        help: "servers of a workspace in each state",
    },
    Described {
        name: "plurnk_mcp_workspace_failures_total",
        labels: &[],
        kind: Kind::Counter,
        unit: None,
        help: "workspace actors that failed",
    },
    Described {
        name: "plurnk_mcp_notifications_dropped_total",
        labels: &[],
        kind: Kind::Counter,
        unit: None,
        help: "server notifications dropped by the flood guard",
    },
    Described {
        name: "plurnk_mcp_server_requests_dropped_total",
        labels: &[],
        kind: Kind::Counter,
        unit: None,
        help: "server requests dropped past the bound on unanswered ones",
    },
    Described {
        name: "plurnk_mcp_sandbox_kills_total",
        labels: &["cause"],
        kind: Kind::Counter,
        unit: None,
        help: "sandboxed processes ended by a limit, by the limit",
    },
    Described {
        name: "plurnk_mcp_gateway_connections",
        labels: &[],
        kind: Kind::Gauge,
        unit: None,
        help: "connections open to the gateway",
    },
    Described {
        name: "plurnk_mcp_gateway_sessions",
        labels: &[],
        kind: Kind::Gauge,
        unit: None,
        help: "2025-11-25 sessions open on the gateway",
    },
    Described {
        name: "plurnk_mcp_gateway_listen_streams",
        labels: &[],
        kind: Kind::Gauge,
        unit: None,
        help: "listen streams open on the gateway (subscriptions/listen, GET)",
    },
    Described {
        name: "mcp_client_operation_duration_seconds",
        labels: &["mcp_method_name", "error_type"],
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "mcp.client.operation.duration: a request the host sent a server, admission to answer",
    },
    Described {
        name: "mcp_server_operation_duration_seconds",
        labels: &["mcp_method_name", "error_type"],
        kind: Kind::Histogram,
        unit: Some(Unit::Seconds),
        help: "mcp.server.operation.duration: a request the gateway served, arrival to answer",
    },
    Described {
        name: "plurnk_mcp_otel_spans_exported_total",
        labels: &[],
        kind: Kind::Counter,
        unit: None,
        help: "spans handed to the OpenTelemetry collector",
    },
    Described {
        name: "plurnk_mcp_otel_spans_dropped_total",
        labels: &["reason"],
        kind: Kind::Counter,
        unit: None,
        help: "spans that never reached the OpenTelemetry collector: queue-full, export-failed",
    },
];

/// Describes every metric to the installed recorder.
fn describe() {
    metrics::with_recorder(|recorder| {
        for metric in &METRICS {
            let (name, help) = (
                KeyName::from_const_str(metric.name),
                SharedString::const_str(metric.help),
            );
            match metric.kind {
                Kind::Counter => recorder.describe_counter(name, metric.unit, help),
                Kind::Gauge => recorder.describe_gauge(name, metric.unit, help),
                Kind::Histogram => recorder.describe_histogram(name, metric.unit, help),
            }
        }
    });
}

/// Registers every counter and gauge without labels at zero, so each is served from the
/// first scrape: a series that appears only when its first event happens breaks a `rate()`
/// and leaves a dashboard's panel saying "no data" where the answer is 0. (A labelled one
/// appears with its first label values; a histogram with its first sample.)
fn served_at_zero() {
    for metric in METRICS.iter().filter(|metric| metric.labels.is_empty()) {
        match metric.kind {
            Kind::Counter => metrics::counter!(metric.name).increment(0),
            Kind::Gauge => metrics::gauge!(metric.name).increment(0.0),
            Kind::Histogram => {}
        }
    }
    // Its causes are few and fixed: each served from the first scrape, like the counters
    // without labels.
    for cause in [
        crate::model::LimitCause::Memory,
        crate::model::LimitCause::Processes,
        crate::model::LimitCause::Files,
        crate::model::LimitCause::Cpu,
    ] {
        metrics::counter!("plurnk_mcp_sandbox_kills_total", "cause" => cause.label()).increment(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metric names the sources record: each `"plurnk_mcp_…"` or `"mcp_…"` literal that
    /// opens a `metrics` macro call (`counter!(`, `gauge!(`, `histogram!(`).
    fn recorded() -> std::collections::BTreeSet<String> {
        fn walk(dir: &std::path::Path, found: &mut std::collections::BTreeSet<String>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, found);
                    continue;
                }
                if path.extension().is_none_or(|ext| ext != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let opened = text
                    .match_indices("\"plurnk_mcp_")
                    .chain(text.match_indices("\"mcp_"));
                for (at, _) in opened {
                    if !text[..at].trim_end().ends_with("!(") {
                        continue;
                    }
                    let name: String = text[at + 1..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    found.insert(name);
                }
            }
        }
        let mut found = std::collections::BTreeSet::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        found
    }

    #[test]
    fn every_recorded_metric_is_described_and_documented() {
        let described: std::collections::BTreeSet<String> =
            METRICS.iter().map(|m| m.name.to_owned()).collect();
        assert_eq!(
            recorded(),
            described,
            "the metrics the sources record and the ones described here differ"
        );
        let readme = include_str!("../README.md");
        for metric in &METRICS {
            assert!(
                readme.contains(metric.name),
                "README.md does not list {}",
                metric.name
            );
        }
    }
}
