//! W3C trace context (and baggage) carried in a request's `_meta` under the keys the MCP
//! specification reserves for it, `traceparent`, `tracestate` and `baggage` (unprefixed, the
//! one exception to its prefix rule), and read from the HTTP `traceparent` header when a
//! request's `_meta` holds none.
//!
//! The propagators are W3C Trace Context and W3C Baggage, fixed rather than the process's
//! global ones: the specification names exactly these keys, and a daemon that never set a
//! global propagator would otherwise propagate nothing. What a client sends is bounded before
//! it is read: a value past its bound, or not a string, is no context at all.

use opentelemetry::Context;
#[cfg(feature = "gateway")]
use opentelemetry::propagation::Extractor;
use opentelemetry::propagation::{Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use serde_json::{Map, Value};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `traceparent` key (and header).
#[cfg(feature = "gateway")]
pub(crate) const TRACEPARENT: &str = "traceparent";

/// The longest value read for each key: a version-00 `traceparent` is 55 characters (a later
/// version may append fields); `tracestate` is bounded as W3C asks a vendor to propagate
/// (512); `baggage` as W3C Baggage bounds a header (8,192).
#[cfg(feature = "gateway")]
const BOUNDS: [(&str, usize); 3] = [(TRACEPARENT, 256), ("tracestate", 512), ("baggage", 8192)];

tokio::task_local! {
    /// The context of the connection attempt a task runs (its listings' parent).
    static ATTEMPT: Context;
}

/// Runs `work` with `span`'s context as the parent of the requests it sends.
pub(super) async fn attempting<F: Future>(span: &tracing::Span, work: F) -> F::Output {
    let context = span.context();
    if context.span().span_context().is_valid() {
        ATTEMPT.scope(context, work).await
    } else {
        work.await
    }
}

/// Writes the trace context of the current span, or of `parent` when the current span is not
/// exported, or of the connection attempt under way, into `meta`; writes nothing when none
/// has a valid one.
pub(super) fn inject_current(meta: &mut Map<String, Value>, parent: Option<&Context>) {
    let current = tracing::Span::current().context();
    if current.span().span_context().is_valid() {
        return inject(&current, meta);
    }
    if let Some(parent) = parent.filter(|parent| parent.span().span_context().is_valid()) {
        return inject(parent, meta);
    }
    let _ = ATTEMPT.try_with(|attempt| inject(attempt, meta));
}

/// Writes `context`'s trace context and baggage into `meta`.
pub(crate) fn inject(context: &Context, meta: &mut Map<String, Value>) {
    let mut carrier = Meta(meta);
    TraceContextPropagator::new().inject_context(context, &mut carrier);
    BaggagePropagator::new().inject_context(context, &mut carrier);
}

/// The context a client sent: from `meta` when it holds a `traceparent`, else from the HTTP
/// headers; `None` when neither holds a valid one.
#[cfg(feature = "gateway")]
pub(super) fn extract(
    meta: &Map<String, Value>,
    headers: Option<&http::HeaderMap>,
) -> Option<Context> {
    let from_meta = meta.contains_key(TRACEPARENT);
    let context = if from_meta {
        read(&MetaReader(meta))
    } else if let Some(headers) = headers {
        read(&HeaderReader(headers))
    } else {
        return None;
    };
    context.span().span_context().is_valid().then_some(context)
}

#[cfg(feature = "gateway")]
fn read(extractor: &dyn Extractor) -> Context {
    let context = TraceContextPropagator::new().extract(extractor);
    BaggagePropagator::new().extract_with_context(&context, extractor)
}

/// The bound of `key`, or `None` for a key the propagators do not read.
#[cfg(feature = "gateway")]
fn bound(key: &str) -> Option<usize> {
    BOUNDS
        .iter()
        .find(|(name, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, bound)| *bound)
}

struct Meta<'a>(&'a mut Map<String, Value>);

impl Injector for Meta<'_> {
    fn set(&mut self, key: &str, value: String) {
        // An empty `tracestate` says nothing; it is left out rather than sent empty.
        if !value.is_empty() {
            self.0.insert(key.to_owned(), Value::String(value));
        }
    }
}

#[cfg(feature = "gateway")]
struct MetaReader<'a>(&'a Map<String, Value>);

#[cfg(feature = "gateway")]
impl Extractor for MetaReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = self.0.get(key)?.as_str()?;
        (value.len() <= bound(key)?).then_some(value)
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .map(String::as_str)
            .filter(|key| bound(key).is_some())
            .collect()
    }
}

#[cfg(feature = "gateway")]
struct HeaderReader<'a>(&'a http::HeaderMap);

#[cfg(feature = "gateway")]
impl Extractor for HeaderReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = self.0.get(key)?.to_str().ok()?;
        (value.len() <= bound(key)?).then_some(value)
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .map(http::HeaderName::as_str)
            .filter(|key| bound(key).is_some())
            .collect()
    }
}

#[cfg(all(test, feature = "gateway"))]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn meta(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), Value::String((*value).to_owned())))
            .collect()
    }

    #[test]
    fn a_context_read_from_meta_is_written_back_as_it_came() {
        let sent = meta(&[
            (TRACEPARENT, PARENT),
            ("tracestate", "rojo=00f067aa0ba902b7"),
        ]);
        let context = extract(&sent, None).expect("a valid context");
        let mut out = Map::new();
        inject(&context, &mut out);
        assert_eq!(out[TRACEPARENT], PARENT);
        assert_eq!(out["tracestate"], "rojo=00f067aa0ba902b7");
    }

    #[test]
    fn meta_wins_over_the_header_and_the_header_serves_when_meta_has_none() {
        let mut headers = http::HeaderMap::new();
        let other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        headers.insert(TRACEPARENT, other.parse().expect("a header value"));
        let from_meta = extract(&meta(&[(TRACEPARENT, PARENT)]), Some(&headers)).expect("meta");
        assert_eq!(
            from_meta.span().span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let from_header = extract(&Map::new(), Some(&headers)).expect("the header");
        assert_eq!(
            from_header.span().span_context().trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
    }

    #[test]
    fn what_a_client_sends_past_its_bound_or_malformed_is_no_context() {
        for bad in [
            "not-a-traceparent",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            &format!("{PARENT}{}", "-0".repeat(200)),
        ] {
            assert!(
                extract(&meta(&[(TRACEPARENT, bad)]), None).is_none(),
                "{bad}"
            );
        }
        let mut number = Map::new();
        number.insert(TRACEPARENT.into(), Value::from(7));
        assert!(extract(&number, None).is_none());
        // A tracestate past its bound is dropped; the traceparent still counts.
        let huge = "a=".to_owned() + &"b".repeat(600);
        let context = extract(&meta(&[(TRACEPARENT, PARENT), ("tracestate", &huge)]), None)
            .expect("the parent");
        let mut out = Map::new();
        inject(&context, &mut out);
        assert!(!out.contains_key("tracestate"));
    }
}
