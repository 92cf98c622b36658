//! A real OTLP/HTTP receiver on 127.0.0.1:0: `POST /v1/traces` and `POST /v1/metrics`, each
//! protobuf body decoded into the collector's own request messages, the official
//! `opentelemetry-proto` definitions (the types OpenTelemetry's Rust crates generate from
//! them), as the OpenTelemetry Collector's OTLP receiver decodes them; what arrived is kept
//! for the test to read. No registry this project reaches ships the Collector or Jaeger as
//! something the project could trust (the one PyPI package that bundles an `otelcol-contrib`
//! binary is an unbranded wrapper of a locally built, "dirty" binary), so the tests decode the
//! real stream themselves.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use tokio_util::sync::CancellationToken;

/// One span as the receiver got it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReceivedSpan {
    /// The `service.name` of its resource.
    pub service: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// `SERVER`, `CLIENT`, `INTERNAL`, …
    pub kind: &'static str,
    /// Every attribute, its value as text.
    pub attributes: BTreeMap<String, String>,
    /// `UNSET`, `OK` or `ERROR`.
    pub status: &'static str,
    pub status_message: String,
    /// The names of its events.
    pub events: Vec<String>,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
}

impl ReceivedSpan {
    /// The attribute `key`, or "" when it is absent.
    pub fn attribute(&self, key: &str) -> &str {
        self.attributes.get(key).map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    /// Every metric's name, with the `service.name` that sent it.
    metrics: Vec<(String, String)>,
    /// Bodies that did not decode (none should).
    malformed: usize,
    /// Export requests received.
    requests: usize,
}

/// The receiver, listening until [`Receiver::stop`] or its drop.
pub struct Receiver {
    address: SocketAddr,
    received: Arc<Mutex<Received>>,
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Receiver {
    /// Listens on a free loopback port.
    pub async fn start() -> Self {
        Self::start_on("127.0.0.1:0".parse().expect("an address")).await
    }

    /// Listens on `address` (a port it had before, to come back on).
    pub async fn start_on(address: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .expect("the receiver binds");
        let address = listener.local_addr().expect("its address");
        let received = Arc::new(Mutex::new(Received::default()));
        let traces = received.clone();
        let metrics = received.clone();
        let app = axum::Router::new()
            .route(
                "/v1/traces",
                axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                    let received = traces.clone();
                    async move { accept_traces(&received, &headers, &body) }
                }),
            )
            .route(
                "/v1/metrics",
                axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                    let received = metrics.clone();
                    async move { accept_metrics(&received, &headers, &body) }
                }),
            );
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .await;
        });
        Self {
            address,
            received,
            stop,
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:PORT`, the value of `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.lock().expect("received").spans.clone()
    }

    /// The spans of trace `trace_id`.
    pub fn trace(&self, trace_id: &str) -> Vec<ReceivedSpan> {
        self.spans()
            .into_iter()
            .filter(|span| span.trace_id == trace_id)
            .collect()
    }

    /// The names of the metrics `service` sent.
    pub fn metric_names(&self, service: &str) -> Vec<String> {
        self.received
            .lock()
            .expect("received")
            .metrics
            .iter()
            .filter(|(from, _)| from == service)
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// Bodies that did not decode as OTLP.
    pub fn malformed(&self) -> usize {
        self.received.lock().expect("received").malformed
    }

    /// Export requests received (each a batch).
    pub fn requests(&self) -> usize {
        self.received.lock().expect("received").requests
    }

    /// Stops listening (the port refuses connections from now on); what it received stays
    /// readable.
    pub async fn stop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// OTLP/HTTP's protobuf encoding, uncompressed (what the exporters send by default).
fn encoded(headers: &HeaderMap) -> Result<(), StatusCode> {
    let kind = headers
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if !kind.starts_with("application/x-protobuf") {
        return Err(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    if headers.contains_key("content-encoding") {
        return Err(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    Ok(())
}

/// An export's answer: the status, its content type, the (empty) protobuf body.
type Answer = (StatusCode, [(&'static str, &'static str); 1], Vec<u8>);

/// The empty export response, protobuf-encoded (zero bytes).
fn answered() -> Answer {
    (
        StatusCode::OK,
        [("content-type", "application/x-protobuf")],
        Vec::new(),
    )
}

fn accept_traces(
    received: &Mutex<Received>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Answer, StatusCode> {
    encoded(headers)?;
    let mut received = received.lock().expect("received");
    received.requests += 1;
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        received.malformed += 1;
        return Err(StatusCode::BAD_REQUEST);
    };
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .map(|resource| service_name(&resource.attributes))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                let status = span.status.clone().unwrap_or_default();
                received.spans.push(ReceivedSpan {
                    service: service.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name.clone(),
                    kind: match span.kind {
                        1 => "INTERNAL",
                        2 => "SERVER",
                        3 => "CLIENT",
                        4 => "PRODUCER",
                        5 => "CONSUMER",
                        _ => "UNSPECIFIED",
                    },
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                        .collect(),
                    status: match status.code {
                        1 => "OK",
                        2 => "ERROR",
                        _ => "UNSET",
                    },
                    status_message: status.message,
                    events: span.events.iter().map(|event| event.name.clone()).collect(),
                    start_unix_nano: span.start_time_unix_nano,
                    end_unix_nano: span.end_time_unix_nano,
                });
            }
        }
    }
    Ok(answered())
}

fn accept_metrics(
    received: &Mutex<Received>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Answer, StatusCode> {
    encoded(headers)?;
    let mut received = received.lock().expect("received");
    received.requests += 1;
    let Ok(request) = ExportMetricsServiceRequest::decode(body) else {
        received.malformed += 1;
        return Err(StatusCode::BAD_REQUEST);
    };
    for resource_metrics in request.resource_metrics {
        let service = resource_metrics
            .resource
            .as_ref()
            .map(|resource| service_name(&resource.attributes))
            .unwrap_or_default();
        for scope in resource_metrics.scope_metrics {
            for metric in scope.metrics {
                received.metrics.push((service.clone(), metric.name));
            }
        }
    }
    Ok(answered())
}

fn service_name(attributes: &[KeyValue]) -> String {
    attributes
        .iter()
        .find(|kv| kv.key == "service.name")
        .map(|kv| text(kv.value.as_ref()))
        .unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|value| value.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => text.clone(),
        Some(any_value::Value::BoolValue(flag)) => flag.to_string(),
        Some(any_value::Value::IntValue(number)) => number.to_string(),
        Some(any_value::Value::DoubleValue(number)) => number.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
