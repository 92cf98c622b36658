//! The OTLP pipeline: spans through the SDK's batching processor behind a bound of our own
//! (a span past it is dropped and counted, never waited for), the two duration histograms
//! through a periodic reader, both exported over HTTP/protobuf from threads of their own, so
//! a slow or dead collector never holds a call. [`Telemetry::shutdown`] flushes what is
//! queued within a bound.
//!
//! The SDK's batching processor drops a span its queue cannot take, but keeps the count to
//! itself; so the queue is bounded here, one step before it: a span is admitted only while
//! fewer than `max_queue` are waiting (counted in, and out as their batch is handed to the
//! exporter), which keeps the processor's own queue (of the same size) from ever filling.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{
    MetricExporter, Protocol, SpanExporter, WithExportConfig, WithHttpConfig,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler as SdkSampler, SdkTracerProvider, SpanData,
    SpanProcessor,
};
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;

use super::config::{Sampler, Settings, Signal, TelemetryError, TelemetryErrors};

/// The installed pipeline: the tracer behind [`Telemetry::layer`], the meter provider the
/// host's histograms go to, and what [`Telemetry::shutdown`] flushes.
#[derive(Debug)]
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    queue: Arc<Queue>,
}

/// What a shutdown's flush did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Flushed {
    /// Whether everything queued was handed to the collector within the bound.
    pub in_time: bool,
    /// Spans dropped over the pipeline's life: the queue was full (a slow or absent
    /// collector), or their export failed.
    pub spans_dropped: u64,
}

/// The spans waiting for export, counted against their bound.
#[derive(Debug)]
struct Queue {
    waiting: AtomicUsize,
    max: usize,
    dropped: AtomicUsize,
}

impl Queue {
    fn drop_spans(&self, count: usize, reason: &'static str) {
        self.dropped.fetch_add(count, Ordering::Relaxed);
        metrics::counter!("plurnk_mcp_otel_spans_dropped_total", "reason" => reason)
            .increment(u64::try_from(count).unwrap_or(u64::MAX));
    }
}

impl Telemetry {
    /// The pipeline the `OTEL_*` variables of `vars` ask for: `Ok(None)` when they ask for
    /// no export (no endpoint named, or `OTEL_SDK_DISABLED=true`).
    ///
    /// # Errors
    ///
    /// Every fault of the variables at once.
    pub fn from_env(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<Self>, TelemetryErrors> {
        match Settings::from_env(vars)? {
            Some(settings) => Self::start(&settings)
                .map(Some)
                .map_err(|error| TelemetryErrors::from(vec![error])),
            None => Ok(None),
        }
    }

    /// Starts exporting as `settings` say, and makes the process's global meter provider the
    /// one the duration histograms are exported through.
    ///
    /// # Errors
    ///
    /// [`TelemetryError::Exporter`] when an exporter cannot be built.
    pub fn start(settings: &Settings) -> Result<Self, TelemetryError> {
        let mut attributes = vec![KeyValue::new("service.name", settings.service_name.clone())];
        attributes.extend(
            settings
                .resource
                .iter()
                .filter(|(key, _)| key != "service.name")
                .map(|(key, value)| KeyValue::new(key.clone(), value.clone())),
        );
        let resource = Resource::builder_empty()
            .with_attributes(attributes)
            .build();
        let queue = Arc::new(Queue {
            waiting: AtomicUsize::new(0),
            max: settings.max_queue,
            dropped: AtomicUsize::new(0),
        });
        let tracer = match &settings.traces {
            Some(signal) => Some(tracer(settings, signal, resource.clone(), &queue)?),
            None => None,
        };
        let meter = match &settings.metrics {
            Some(signal) => {
                let exporter = MetricExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(signal.endpoint.clone())
                    .with_timeout(signal.timeout)
                    .with_headers(signal.headers.iter().cloned().collect())
                    .build()
                    .map_err(exporter_error)?;
                let reader = PeriodicReader::builder(exporter)
                    .with_interval(settings.metric_interval)
                    .build();
                let provider = SdkMeterProvider::builder()
                    .with_resource(resource)
                    .with_reader(reader)
                    .build();
                opentelemetry::global::set_meter_provider(provider.clone());
                Some(provider)
            }
            None => None,
        };
        Ok(Self {
            tracer,
            meter,
            queue,
        })
    }

    /// The `tracing` layer that exports spans: add it to the process's subscriber, filtered
    /// to what should be exported (the host's spans are of target [`super::TARGET`]). A
    /// pipeline that exports no traces gives a layer that exports nothing.
    pub fn layer<S>(
        &self,
    ) -> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let provider = self
            .tracer
            .clone()
            .unwrap_or_else(|| SdkTracerProvider::builder().build());
        // Lean: no busy/idle timing and no OpenTelemetry context pushed on each entry (a
        // call's span is entered at every poll of the call), no code location, thread, level
        // or target attributes: the conventions' attributes are the span's. A daemon that
        // mixes spans of the OpenTelemetry API under the host's builds a layer of its own.
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("plurnk-mcp"))
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_threads(false)
            .with_location(false)
            .with_target(false)
            .with_level(false)
    }

    /// Spans dropped so far (queue full, or export failed).
    pub fn spans_dropped(&self) -> u64 {
        u64::try_from(self.queue.dropped.load(Ordering::Relaxed)).unwrap_or(u64::MAX)
    }

    /// Flushes what is queued and stops exporting, within `bound` whatever the collector
    /// does (a dead one is not waited for past it). Spans ended later are not exported.
    pub fn shutdown(self, bound: Duration) -> Flushed {
        let (done, finished) = std::sync::mpsc::sync_channel(1);
        let Self {
            tracer,
            meter,
            queue,
        } = self;
        // The SDK's shutdown blocks (and its meter provider takes no bound): it runs on a
        // thread of its own, and this waits for it at most `bound`.
        let spawned = std::thread::Builder::new()
            .name("plurnk-mcp-otel-flush".into())
            .spawn(move || {
                let traces =
                    tracer.map_or(Ok(()), |provider| provider.shutdown_with_timeout(bound));
                let metrics =
                    meter.map_or(Ok(()), |provider| provider.shutdown_with_timeout(bound));
                let _ = done.send(traces.is_ok() && metrics.is_ok());
            });
        let in_time = spawned.is_ok() && finished.recv_timeout(bound).unwrap_or(false);
        Flushed {
            in_time,
            spans_dropped: u64::try_from(queue.dropped.load(Ordering::Relaxed)).unwrap_or(u64::MAX),
        }
    }
}

fn exporter_error(error: opentelemetry_otlp::ExporterBuildError) -> TelemetryError {
    TelemetryError::Exporter {
        detail: crate::redact::scrub_capped(&error.to_string(), 512),
    }
}

fn tracer(
    settings: &Settings,
    signal: &Signal,
    resource: Resource,
    queue: &Arc<Queue>,
) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(signal.endpoint.clone())
        .with_timeout(signal.timeout)
        .with_headers(signal.headers.iter().cloned().collect())
        .build()
        .map_err(exporter_error)?;
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(settings.max_queue)
        .with_max_export_batch_size(settings.max_batch.min(settings.max_queue))
        .with_scheduled_delay(settings.schedule_delay)
        .build();
    let batch = BatchSpanProcessor::builder(Counted {
        inner: exporter,
        queue: queue.clone(),
    })
    .with_batch_config(config)
    .build();
    Ok(SdkTracerProvider::builder()
        .with_resource(resource)
        .with_sampler(sampler(settings.sampler))
        .with_span_processor(Bounded {
            inner: batch,
            queue: queue.clone(),
        })
        .build())
}

fn sampler(sampler: Sampler) -> SdkSampler {
    match sampler {
        Sampler::AlwaysOn => SdkSampler::AlwaysOn,
        Sampler::AlwaysOff => SdkSampler::AlwaysOff,
        Sampler::Ratio(ratio) => SdkSampler::TraceIdRatioBased(ratio),
        Sampler::ParentBasedOn => SdkSampler::ParentBased(Box::new(SdkSampler::AlwaysOn)),
        Sampler::ParentBasedOff => SdkSampler::ParentBased(Box::new(SdkSampler::AlwaysOff)),
        Sampler::ParentBasedRatio(ratio) => {
            SdkSampler::ParentBased(Box::new(SdkSampler::TraceIdRatioBased(ratio)))
        }
    }
}

/// The batching processor behind the bound of [`Queue`].
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    queue: Arc<Queue>,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let queue = &self.queue;
        let admitted = queue
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |waiting| {
                (waiting < queue.max).then_some(waiting + 1)
            })
            .is_ok();
        if admitted {
            self.inner.on_end(span);
        } else {
            queue.drop_spans(1, "queue-full");
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting each batch out of the queue as it is handed over, and its
/// spans as dropped when the export fails.
#[derive(Debug)]
struct Counted {
    inner: SpanExporter,
    queue: Arc<Queue>,
}

impl opentelemetry_sdk::trace::SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let count = batch.len();
        self.queue.waiting.fetch_sub(count, Ordering::AcqRel);
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => metrics::counter!("plurnk_mcp_otel_spans_exported_total")
                .increment(u64::try_from(count).unwrap_or(u64::MAX)),
            Err(_) => self.queue.drop_spans(count, "export-failed"),
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
