//! The standard `OTEL_*` variables, read from a map (never the process environment, so a
//! test hands its own): where spans and metrics go, the service's name, the queue's bounds,
//! the sampler. Export is off unless an OTLP endpoint is named. Every fault is reported at
//! once, each naming its variable and the fix; no message quotes a value that could be a
//! secret (an endpoint, a header), and header values are registered as secrets.

use std::collections::BTreeMap;
use std::time::Duration;

/// Where and how one signal (traces or metrics) is exported.
#[derive(Clone)]
pub(super) struct Signal {
    /// The full OTLP/HTTP URL (`…/v1/traces`, `…/v1/metrics`).
    pub(super) endpoint: String,
    /// Headers sent with every export (their values are secrets).
    pub(super) headers: Vec<(String, String)>,
    /// How long one export may take before it fails.
    pub(super) timeout: Duration,
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // An endpoint may carry credentials and header values are secrets: neither is shown.
        f.debug_struct("Signal")
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Which traces are kept (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Sampler {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
    ParentBasedOn,
    ParentBasedOff,
    ParentBasedRatio(f64),
}

/// What the variables ask for, when they ask for export at all.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// `service.name` (`OTEL_SERVICE_NAME`, default `plurnk-mcp`).
    pub(super) service_name: String,
    /// Further resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    pub(super) resource: Vec<(String, String)>,
    /// Where spans go, when they are exported.
    pub(super) traces: Option<Signal>,
    /// Where the duration histograms go, when they are exported.
    pub(super) metrics: Option<Signal>,
    /// How often metrics are exported (`OTEL_METRIC_EXPORT_INTERVAL`).
    pub(super) metric_interval: Duration,
    /// Spans held for export at most (`OTEL_BSP_MAX_QUEUE_SIZE`): beyond it they are dropped
    /// and counted, never waited for.
    pub(super) max_queue: usize,
    /// Spans sent in one export at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
    pub(super) max_batch: usize,
    /// How long a span waits before its batch goes (`OTEL_BSP_SCHEDULE_DELAY`).
    pub(super) schedule_delay: Duration,
    pub(super) sampler: Sampler,
}

/// One fault in the `OTEL_*` variables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// An endpoint that is not an `http://` or `https://` URL.
    #[error(
        "{variable} is not an http:// or https:// URL: name the collector's OTLP/HTTP \
         endpoint, such as http://127.0.0.1:4318"
    )]
    InvalidEndpoint {
        /// The variable.
        variable: String,
    },
    /// A protocol other than `http/protobuf`.
    #[error(
        "{variable} asks for {protocol:?}, which this build does not export: set it to \
         http/protobuf (the collector's port 4318), or leave it unset"
    )]
    UnsupportedProtocol {
        /// The variable.
        variable: String,
        /// The protocol asked for (cut).
        protocol: String,
    },
    /// An exporter other than `otlp` or `none`.
    #[error("{variable} names {exporter:?}: this build exports otlp (or none); set one of them")]
    UnsupportedExporter {
        /// The variable.
        variable: String,
        /// The exporter asked for (cut).
        exporter: String,
    },
    /// A header list entry that is not `name=value` with a valid header name.
    #[error(
        "{variable}: entry {entry} is not name=value with a valid HTTP header name: write \
         name1=value1,name2=value2 (values percent-encoded)"
    )]
    InvalidHeader {
        /// The variable.
        variable: String,
        /// Which entry (from 1).
        entry: usize,
    },
    /// A resource attribute entry that is not `key=value`.
    #[error("{variable}: entry {entry} is not key=value: write key1=value1,key2=value2")]
    InvalidResource {
        /// The variable.
        variable: String,
        /// Which entry (from 1).
        entry: usize,
    },
    /// A number that is not a positive integer within its bound.
    #[error("{variable} must be a whole number from {min} to {max}")]
    InvalidNumber {
        /// The variable.
        variable: String,
        /// The least value.
        min: u64,
        /// The greatest value.
        max: u64,
    },
    /// A switch that is neither `true` nor `false`.
    #[error("{variable} must be true or false")]
    InvalidSwitch {
        /// The variable.
        variable: String,
    },
    /// An exporter the SDK could not build (its words, scrubbed).
    #[error("the OTLP exporter could not be built: {detail}")]
    Exporter {
        /// Why.
        detail: String,
    },
    /// A sampler this build does not know, or a ratio outside 0 to 1.
    #[error(
        "{variable} must be always_on, always_off, traceidratio, parentbased_always_on, \
         parentbased_always_off or parentbased_traceidratio, with OTEL_TRACES_SAMPLER_ARG a \
         ratio from 0 to 1 for the ratio samplers"
    )]
    InvalidSampler {
        /// The variable.
        variable: String,
    },
}

/// Every fault of the `OTEL_*` variables at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct TelemetryErrors {
    errors: Vec<TelemetryError>,
}

impl From<Vec<TelemetryError>> for TelemetryErrors {
    fn from(errors: Vec<TelemetryError>) -> Self {
        Self { errors }
    }
}

impl TelemetryErrors {
    /// The faults, in the order the variables were read.
    pub fn errors(&self) -> &[TelemetryError] {
        &self.errors
    }
}

/// How much of an operator's word a message quotes.
const QUOTED: usize = 40;

fn cut(text: &str) -> String {
    text.chars().take(QUOTED).collect()
}

/// The `OTEL_*` variables of an environment, read with their faults gathered.
struct Reader {
    vars: BTreeMap<String, String>,
    errors: Vec<TelemetryError>,
}

impl Reader {
    /// A variable's value; an empty one counts as unset, as the specification says.
    fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(|value| value.trim())
            .filter(|value| !value.is_empty())
    }

    fn switch(&mut self, name: &str) -> bool {
        match self.get(name).map(str::to_ascii_lowercase).as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => {
                self.errors.push(TelemetryError::InvalidSwitch {
                    variable: name.to_owned(),
                });
                false
            }
        }
    }

    fn number(&mut self, name: &str, default: u64, min: u64, max: u64) -> u64 {
        let Some(text) = self.get(name) else {
            return default;
        };
        match text.parse::<u64>() {
            Ok(value) if (min..=max).contains(&value) => value,
            _ => {
                self.errors.push(TelemetryError::InvalidNumber {
                    variable: name.to_owned(),
                    min,
                    max,
                });
                default
            }
        }
    }

    fn millis(&mut self, name: &str, default: u64, min: u64, max: u64) -> Duration {
        Duration::from_millis(self.number(name, default, min, max))
    }

    /// Whether `OTEL_<SIGNAL>_EXPORTER` leaves the signal on.
    fn exporter(&mut self, name: &str) -> bool {
        match self.get(name).map(str::to_ascii_lowercase).as_deref() {
            None | Some("otlp") => true,
            Some("none") => false,
            Some(other) => {
                let exporter = cut(other);
                self.errors.push(TelemetryError::UnsupportedExporter {
                    variable: name.to_owned(),
                    exporter,
                });
                false
            }
        }
    }

    fn protocol(&mut self, name: &str) {
        if let Some(protocol) = self.get(name)
            && !protocol.eq_ignore_ascii_case("http/protobuf")
        {
            let protocol = cut(protocol);
            self.errors.push(TelemetryError::UnsupportedProtocol {
                variable: name.to_owned(),
                protocol,
            });
        }
    }

    /// `name1=value1,…`, percent-decoded, each value a secret.
    fn headers(&mut self, name: &str) -> Vec<(String, String)> {
        let Some(text) = self.get(name).map(str::to_owned) else {
            return Vec::new();
        };
        let mut headers = Vec::new();
        for (index, entry) in text.split(',').enumerate() {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let parsed = entry.split_once('=').and_then(|(key, value)| {
                let key = key.trim();
                http::HeaderName::from_bytes(key.as_bytes()).ok()?;
                let value = percent_decode(value.trim())?;
                http::HeaderValue::from_str(&value).ok()?;
                Some((key.to_ascii_lowercase(), value))
            });
            match parsed {
                Some(header) => headers.push(header),
                None => self.errors.push(TelemetryError::InvalidHeader {
                    variable: name.to_owned(),
                    entry: index + 1,
                }),
            }
        }
        crate::redact::register(headers.iter().map(|(_, value)| value.as_str()));
        headers
    }

    fn endpoint(&mut self, name: &str, value: &str, path: &str) -> Option<String> {
        let lower = value.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"));
        if rest.is_none_or(|rest| rest.is_empty() || rest.starts_with('/')) {
            self.errors.push(TelemetryError::InvalidEndpoint {
                variable: name.to_owned(),
            });
            return None;
        }
        Some(format!("{}{path}", value.trim_end_matches('/')))
    }

    /// What both signals share: `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL), its headers and
    /// timeout; each read once.
    fn shared(&mut self) -> Shared {
        self.protocol("OTEL_EXPORTER_OTLP_PROTOCOL");
        let base = self.get("OTEL_EXPORTER_OTLP_ENDPOINT").map(str::to_owned);
        let base = base.filter(|value| {
            self.endpoint("OTEL_EXPORTER_OTLP_ENDPOINT", value, "")
                .is_some()
        });
        Shared {
            base,
            headers: self.headers("OTEL_EXPORTER_OTLP_HEADERS"),
            timeout: self.millis("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000, 1, 600_000),
        }
    }

    /// One signal: its endpoint (the signal's own, or the shared one with the signal's
    /// path), headers and timeout; `None` when no endpoint names it or it is turned off.
    fn signal(&mut self, signal: &str, path: &str, shared: &Shared) -> Option<Signal> {
        let on = self.exporter(&format!("OTEL_{signal}_EXPORTER"));
        self.protocol(&format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL"));
        let own = format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT");
        let endpoint = match (self.get(&own).map(str::to_owned), &shared.base) {
            (Some(value), _) => self.endpoint(&own, &value, ""),
            (None, Some(base)) => self.endpoint("OTEL_EXPORTER_OTLP_ENDPOINT", base, path),
            (None, None) => None,
        };
        let own_headers = self.headers(&format!("OTEL_EXPORTER_OTLP_{signal}_HEADERS"));
        // The signal's own headers win over the shared ones of the same name.
        let mut headers: Vec<(String, String)> = shared
            .headers
            .iter()
            .filter(|(name, _)| !own_headers.iter().any(|(own, _)| own == name))
            .cloned()
            .collect();
        headers.extend(own_headers);
        let timeout_variable = format!("OTEL_EXPORTER_OTLP_{signal}_TIMEOUT");
        let timeout = match self.get(&timeout_variable) {
            Some(_) => self.millis(&timeout_variable, 10_000, 1, 600_000),
            None => shared.timeout,
        };
        Some(Signal {
            endpoint: endpoint?,
            headers,
            timeout,
        })
        .filter(|_| on)
    }

    fn sampler(&mut self) -> Sampler {
        let name = self.get("OTEL_TRACES_SAMPLER").map(str::to_ascii_lowercase);
        let ratio = |reader: &mut Self| match reader.get("OTEL_TRACES_SAMPLER_ARG") {
            None => Some(1.0),
            Some(text) => text
                .parse::<f64>()
                .ok()
                .filter(|ratio| (0.0..=1.0).contains(ratio)),
        };
        let sampler = match name.as_deref() {
            None | Some("parentbased_always_on") => Some(Sampler::ParentBasedOn),
            Some("always_on") => Some(Sampler::AlwaysOn),
            Some("always_off") => Some(Sampler::AlwaysOff),
            Some("parentbased_always_off") => Some(Sampler::ParentBasedOff),
            Some("traceidratio") => ratio(self).map(Sampler::Ratio),
            Some("parentbased_traceidratio") => ratio(self).map(Sampler::ParentBasedRatio),
            Some(_) => None,
        };
        sampler.unwrap_or_else(|| {
            self.errors.push(TelemetryError::InvalidSampler {
                variable: "OTEL_TRACES_SAMPLER".to_owned(),
            });
            Sampler::ParentBasedOn
        })
    }

    fn resource(&mut self) -> Vec<(String, String)> {
        let Some(text) = self.get("OTEL_RESOURCE_ATTRIBUTES").map(str::to_owned) else {
            return Vec::new();
        };
        let mut attributes = Vec::new();
        for (index, entry) in text.split(',').enumerate() {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let parsed = entry.split_once('=').and_then(|(key, value)| {
                let key = key.trim();
                (!key.is_empty()).then_some(())?;
                Some((key.to_owned(), percent_decode(value.trim())?))
            });
            match parsed {
                Some(attribute) => attributes.push(attribute),
                None => self.errors.push(TelemetryError::InvalidResource {
                    variable: "OTEL_RESOURCE_ATTRIBUTES".to_owned(),
                    entry: index + 1,
                }),
            }
        }
        attributes
    }
}

/// What both signals' settings start from.
struct Shared {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, when it is a valid URL.
    base: Option<String>,
    headers: Vec<(String, String)>,
    timeout: Duration,
}

/// `%XX` sequences decoded (W3C Baggage's and the headers variable's encoding); `None` for
/// a malformed sequence or text that is not UTF-8 once decoded.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = text.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl Settings {
    /// Reads the `OTEL_*` variables of `vars`: `Ok(None)` when nothing is to be exported (no
    /// OTLP endpoint is named, or `OTEL_SDK_DISABLED=true`), else what to export, or every
    /// fault at once.
    pub fn from_env(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Option<Self>, TelemetryErrors> {
        let mut reader = Reader {
            vars: vars
                .into_iter()
                .filter(|(key, _)| key.starts_with("OTEL_"))
                .collect(),
            errors: Vec::new(),
        };
        let disabled = reader.switch("OTEL_SDK_DISABLED");
        let shared = reader.shared();
        let traces = reader.signal("TRACES", "/v1/traces", &shared);
        let metrics = reader.signal("METRICS", "/v1/metrics", &shared);
        let settings = Self {
            service_name: reader
                .get("OTEL_SERVICE_NAME")
                .unwrap_or("plurnk-mcp")
                .to_owned(),
            resource: reader.resource(),
            metric_interval: reader.millis("OTEL_METRIC_EXPORT_INTERVAL", 60_000, 100, 86_400_000),
            max_queue: usize::try_from(reader.number("OTEL_BSP_MAX_QUEUE_SIZE", 2048, 1, 1 << 20))
                .unwrap_or(2048),
            max_batch: usize::try_from(reader.number(
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
                512,
                1,
                1 << 20,
            ))
            .unwrap_or(512),
            schedule_delay: reader.millis("OTEL_BSP_SCHEDULE_DELAY", 5000, 1, 3_600_000),
            sampler: reader.sampler(),
            traces,
            metrics,
        };
        if !reader.errors.is_empty() {
            return Err(TelemetryErrors {
                errors: reader.errors,
            });
        }
        let exports = settings.traces.is_some() || settings.metrics.is_some();
        Ok((exports && !disabled).then_some(settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<Option<Settings>, TelemetryErrors> {
        Settings::from_env(
            pairs
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned())),
        )
    }

    #[test]
    fn export_is_off_unless_an_endpoint_is_named() {
        assert!(read(&[]).expect("no fault").is_none());
        assert!(
            read(&[("OTEL_SERVICE_NAME", "x")])
                .expect("no fault")
                .is_none()
        );
        let on = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")])
            .expect("no fault")
            .expect("on");
        assert_eq!(
            on.traces.as_ref().map(|signal| signal.endpoint.as_str()),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            on.metrics.as_ref().map(|signal| signal.endpoint.as_str()),
            Some("http://127.0.0.1:4318/v1/metrics")
        );
        assert_eq!(on.service_name, "plurnk-mcp");
        let own = read(&[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://c.example/x/traces",
            ),
            ("OTEL_METRICS_EXPORTER", "none"),
        ])
        .expect("no fault")
        .expect("on");
        assert_eq!(
            own.traces.map(|signal| signal.endpoint),
            Some("https://c.example/x/traces".to_owned())
        );
        assert!(own.metrics.is_none());
        let disabled = read(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert!(disabled.expect("no fault").is_none());
    }

    #[test]
    fn every_fault_of_the_variables_is_its_own_error_naming_the_variable() {
        let secret = "s3cr3t-otlp-header-value";
        let errors = read(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                &format!("api-key={secret},bad header=x"),
            ),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ("OTEL_SDK_DISABLED", "maybe"),
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment=prod,=x"),
        ])
        .expect_err("faults");
        let text = errors.to_string();
        for variable in [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_TRACES_EXPORTER",
            "OTEL_BSP_MAX_QUEUE_SIZE",
            "OTEL_SDK_DISABLED",
            "OTEL_TRACES_SAMPLER",
            "OTEL_RESOURCE_ATTRIBUTES",
        ] {
            assert!(text.contains(variable), "{variable} not named in: {text}");
        }
        assert!(!text.contains(secret), "a header value was quoted: {text}");
        assert!(
            !text.contains("collector:4318"),
            "an endpoint was quoted: {text}"
        );
        assert_eq!(errors.errors().len(), 8, "{:?}", errors.errors());
        assert_eq!(crate::redact::scrub(secret), crate::redact::REDACTED);
    }
}
