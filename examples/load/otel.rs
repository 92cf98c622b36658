//! The host with OpenTelemetry export on (feature `otel`), beside the same host with it off:
//! its spans and duration histograms exported over OTLP/HTTP to a live receiver, or to a
//! collector that is down (a port that refuses). The receiver runs in the orchestrating
//! process, never the trial's, so what it does is not counted as the client's CPU.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::spec::{Client, TrialResult, TrialSpec};

/// Runs `calls` (not started yet) with the host's telemetry exporting as `client` says;
/// reports the spans that never reached the collector as `spans_dropped`.
#[cfg(feature = "otel")]
pub async fn calls(
    spec: &TrialSpec,
    client: Client,
    calls: impl Future<Output = anyhow::Result<TrialResult>>,
) -> anyhow::Result<TrialResult> {
    use anyhow::Context as _;
    use plurnk_mcp::telemetry::{TARGET, Telemetry};
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    let endpoint = match client {
        Client::HostOtel => spec
            .otlp
            .clone()
            .context("no live OTLP receiver was given")?,
        _ => {
            // A port that was free a moment ago: the collector is down.
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            format!("http://{}", listener.local_addr()?)
        }
    };
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), endpoint),
        (
            "OTEL_SERVICE_NAME".to_owned(),
            "plurnk-mcp-bench".to_owned(),
        ),
    ];
    let telemetry = Telemetry::from_env(vars)
        .map_err(|errors| anyhow::anyhow!("{errors}"))?
        .context("export is on")?;
    // As the command line exports: the host's spans only.
    let subscriber = tracing_subscriber::registry().with(telemetry.layer().with_filter(
        tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::TRACE),
    ));
    tracing::subscriber::set_global_default(subscriber)?;
    let mut result = calls.await?;
    let flushed =
        tokio::task::spawn_blocking(move || telemetry.shutdown(std::time::Duration::from_secs(5)))
            .await?;
    result.set("spans_dropped", flushed.spans_dropped as f64);
    Ok(result)
}

#[cfg(not(feature = "otel"))]
pub async fn calls(
    _: &TrialSpec,
    _: Client,
    _: impl Future<Output = anyhow::Result<TrialResult>>,
) -> anyhow::Result<TrialResult> {
    anyhow::bail!("this build has no OpenTelemetry: build the example with --features otel")
}

/// A live OTLP/HTTP receiver: every `POST` is read whole and answered `200` with the empty
/// export response (protobuf, zero bytes); what arrived is counted.
pub struct Receiver {
    pub url: String,
    pub requests: Arc<AtomicU64>,
    pub bytes: Arc<AtomicU64>,
}

impl Receiver {
    pub async fn start() -> anyhow::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (requests, bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let counted = (requests.clone(), bytes.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let _ = answer(stream, &counted.0, &counted.1).await;
                });
            }
        });
        Ok(Receiver {
            url,
            requests,
            bytes,
        })
    }

    pub fn received(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// Serves one keep-alive connection: each request's head, its body by `content-length`.
async fn answer(
    stream: tokio::net::TcpStream,
    requests: &AtomicU64,
    bytes: &AtomicU64,
) -> std::io::Result<()> {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        requests.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(length as u64, Ordering::Relaxed);
        writer
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
            )
            .await?;
    }
}
