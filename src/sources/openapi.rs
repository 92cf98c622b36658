//! An OpenAPI 3.x document as a tool source: one tool per operation, called over HTTP.
//!
//! An [`OpenApiDeclaration`] names the document (a file or an `http(s)://` URL), the base URL
//! of the API, the headers and bearer every request carries (credentials as `${NAME}`), the
//! bounds of a call, and optionally which operations to offer. [`OpenApiDeclaration::open`]
//! expands the credentials (registering each with [`crate::redact`]), reads the document
//! (bounded in size and time; `document` resolves its local `$ref`s and builds the tools) and
//! gives an [`OpenApiSource`], the [`ToolSource`](crate::sources::ToolSource). [`OpenApiDeclaration::check`] says whether
//! the document is there and whether it is the version the declaration was written against.
//!
//! The document and the API are adversaries like any MCP server. The document is bounded in
//! bytes as read and as resolved (`document`). Credentials go only where the declaration
//! says: to `baseUrl`, or, without it, to the document's server only when that is the spec
//! URL's own origin (a document read from a file, or one naming another origin, needs
//! `baseUrl` before any header or bearer is sent). A server the document names at another
//! origin is reached under the host's address rule (`protocol::AddressRule`, judged
//! against the spec URL): never a link-local or reserved address, a loopback or private one
//! only from a spec URL of that class. A model's arguments never set the request's framing,
//! credentials or routing headers. A call ends by its deadline, its response is bounded, and
//! redirects are followed only within the origin they started from (the transport's own
//! policy). What comes back — a body, a connection error that prints the URL — is scrubbed
//! of every registered secret before it leaves the source. Only JSON documents are read (no
//! YAML parser is among the crate's dependencies); a YAML document gets an error saying how
//! to convert it.

mod call;
mod document;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::io::AsyncReadExt;

pub use self::document::Bounds;
use self::document::{Document, Operation};
use super::error::OpenError;
use super::{DeclarationError, Finding, SourceTool};
use crate::config::{ConfigError, Piece, Secret};
use crate::protocol::{AddressRule, Bounded, describe, read_bounded};

/// The default deadline of one request, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// The default bound of one response body.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// The bound of the document itself, whether read from a file or fetched.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// The default bound of one tool written out (name, description, input schema, references
/// resolved): eleven times the largest seen in public APIs (Box's, 94 KB).
pub const DEFAULT_MAX_TOOL_BYTES: usize = 1024 * 1024;

/// The default bound of all of a document's tools together, references resolved: nine times
/// the largest seen in public APIs (PagerDuty's, 0.92 MB), and half the 16 MiB bound of one
/// message, so the source's `tools/list` always fits one.
pub const DEFAULT_MAX_CATALOG_BYTES: usize = 8 * 1024 * 1024;

/// How long [`OpenApiDeclaration::check`] waits for a document URL.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The fields a declaration may have, for the unknown-field error.
const FIELDS: [&str; 12] = [
    "name",
    "spec",
    "baseUrl",
    "headers",
    "bearer",
    "timeoutMs",
    "maxResponseBytes",
    "maxToolBytes",
    "maxCatalogBytes",
    "operations",
    "version",
    "kind",
];

/// A declared OpenAPI source, read by [`parse`](Self::parse).
///
/// `Debug` shows header names, never a header's value or the bearer (unless it is a
/// `${NAME}` reference, which names where the secret lives).
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OpenApiDeclaration {
    /// The namespace's name (`[a-z][a-z0-9-]*`, as a server alias).
    pub name: String,
    /// The document: a file path (relative to the declaration's file) or an `http(s)://` URL.
    pub spec: String,
    /// The API's base URL; absent, the document's first `servers[].url`, resolved against
    /// the document's URL when relative.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Headers every request carries; values may hold `${NAME}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A bearer credential, sent as `Authorization: Bearer …`: exactly one `${NAME}`.
    #[serde(default, deserialize_with = "secret")]
    pub bearer: Option<Secret>,
    /// The deadline of one request, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// The bound of one response body.
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: usize,
    /// The bound of one tool written out, references resolved.
    #[serde(default = "default_max_tool_bytes")]
    pub max_tool_bytes: usize,
    /// The bound of all tools together, references resolved.
    #[serde(default = "default_max_catalog_bytes")]
    pub max_catalog_bytes: usize,
    /// The operationIds to offer; absent offers every operation.
    #[serde(default)]
    pub operations: Option<Vec<String>>,
    /// The document's `info.version` this declaration was written against.
    #[serde(default)]
    pub version: Option<String>,
    /// The file (or `add` action) the declaration came from, for errors and relative paths.
    #[serde(skip)]
    pub origin: String,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn default_max_response_bytes() -> usize {
    DEFAULT_MAX_RESPONSE_BYTES
}

fn default_max_tool_bytes() -> usize {
    DEFAULT_MAX_TOOL_BYTES
}

fn default_max_catalog_bytes() -> usize {
    DEFAULT_MAX_CATALOG_BYTES
}

fn secret<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Secret>, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.map(Secret::new))
}

/// Whether a declaration's `${NAME}` references are as the operator wrote them, or were
/// expanded as its connection was prepared (how the host hands it to the opener).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// As declared: a credential must be a reference, and references must be well formed.
    AsDeclared,
    /// Expanded: every credential is its value now, which the declaration as written was
    /// checked to take from the environment.
    Expanded,
}

/// Where the document is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SpecLocation {
    File(PathBuf),
    Url(reqwest::Url),
}

/// An opened OpenAPI source: its operations and what every request carries.
///
/// `Debug` shows the tool names and header names, never a header's value.
pub struct OpenApiSource {
    /// The namespace's name, for messages.
    name: String,
    /// The document's `info.version`.
    version: Option<String>,
    /// The API's base URL, without a trailing `/`.
    base_url: reqwest::Url,
    /// Headers every request carries, expanded (the bearer included as `Authorization`).
    headers: reqwest::header::HeaderMap,
    /// The deadline of one request.
    timeout: Duration,
    /// The bound of one response body.
    max_response_bytes: usize,
    /// The operations by tool name.
    operations: BTreeMap<String, Arc<Operation>>,
    /// The client: same-origin redirects only, no deadline of its own (each call has one).
    client: reqwest::Client,
    /// The address rule requests meet when the document chose the API's origin: judged
    /// before each request too, since a proxy would resolve the name unjudged.
    rule: Option<AddressRule>,
}

// === impl OpenApiDeclaration ===

impl OpenApiDeclaration {
    /// Reads a declaration from `value`, which came from `origin` (a file, or an `add`
    /// action). A `kind` field is allowed (the caller's dispatch), and ignored.
    ///
    /// # Errors
    ///
    /// Every fault at once: an unknown field, a field of the wrong type, a name that is not an
    /// alias, a `spec` that is neither a path nor an `http(s)://` URL, a bad header, a literal
    /// credential, a non-positive bound, an empty operation name.
    pub fn parse(value: &Value, origin: &str) -> Result<Self, Vec<DeclarationError>> {
        Self::read(value, origin, Written::AsDeclared)
    }

    /// Reads a declaration whose `${NAME}` references were already expanded, as the host
    /// hands a source to its opener: the rules on how credentials are written held for the
    /// declaration as written (the host read it with [`parse`](Self::parse) before), and here
    /// a credential is its value by design.
    ///
    /// # Errors
    ///
    /// As [`parse`](Self::parse), but for those rules.
    pub fn parse_expanded(value: &Value, origin: &str) -> Result<Self, Vec<DeclarationError>> {
        Self::read(value, origin, Written::Expanded)
    }

    fn read(value: &Value, origin: &str, written: Written) -> Result<Self, Vec<DeclarationError>> {
        let mut faults = Faults {
            origin,
            list: Vec::new(),
        };
        let Some(object) = value.as_object() else {
            faults.push(
                "(declaration)",
                "the declaration is not a JSON object",
                "write an object such as {\"name\": \"pets\", \"spec\": \"pets.json\"}",
            );
            return Err(faults.list);
        };
        for key in object.keys() {
            if !FIELDS.contains(&key.as_str()) {
                faults.push(
                    key,
                    "unknown field",
                    &format!(
                        "remove it; the fields are {}",
                        FIELDS[..FIELDS.len() - 1].join(", ")
                    ),
                );
            }
        }
        let name: Option<String> = faults.field(object, "name", true, "a string such as \"pets\"");
        let spec: Option<String> =
            faults.field(object, "spec", true, "a file path or an http(s):// URL");
        let base_url: Option<String> = faults.field(object, "baseUrl", false, "an http(s):// URL");
        let headers: Option<BTreeMap<String, String>> = faults.field(
            object,
            "headers",
            false,
            "an object of header names to string values",
        );
        let bearer: Option<String> =
            faults.field(object, "bearer", false, "a string such as \"${API_TOKEN}\"");
        let timeout_ms: Option<u64> = faults.field(
            object,
            "timeoutMs",
            false,
            "a positive number of milliseconds",
        );
        let max_response_bytes: Option<usize> = faults.field(
            object,
            "maxResponseBytes",
            false,
            "a positive number of bytes",
        );
        let max_tool_bytes: Option<usize> =
            faults.field(object, "maxToolBytes", false, "a positive number of bytes");
        let max_catalog_bytes: Option<usize> = faults.field(
            object,
            "maxCatalogBytes",
            false,
            "a positive number of bytes",
        );
        let operations: Option<Vec<String>> =
            faults.field(object, "operations", false, "an array of operationIds");
        let version: Option<String> = faults.field(
            object,
            "version",
            false,
            "the document's info.version, a string",
        );

        target_faults(&mut faults, &name, &spec, &base_url);
        let headers = headers.unwrap_or_default();
        credential_faults(&mut faults, &headers, &bearer, written);
        bound_faults(
            &mut faults,
            timeout_ms,
            [max_response_bytes, max_tool_bytes, max_catalog_bytes],
            &operations,
        );
        if !faults.list.is_empty() {
            return Err(faults.list);
        }
        let (Some(name), Some(spec)) = (name, spec) else {
            return Err(faults.list);
        };
        Ok(Self {
            name,
            spec,
            base_url,
            headers,
            bearer: bearer.map(Secret::new),
            timeout_ms: timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
            max_response_bytes: max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES),
            max_tool_bytes: max_tool_bytes.unwrap_or(DEFAULT_MAX_TOOL_BYTES),
            max_catalog_bytes: max_catalog_bytes.unwrap_or(DEFAULT_MAX_CATALOG_BYTES),
            operations,
            version,
            origin: origin.to_owned(),
        })
    }

    /// Where the document is: a URL as written, a path relative to the declaration's file.
    fn location(&self) -> Result<SpecLocation, DeclarationError> {
        if looks_like_url(&self.spec) {
            return reqwest::Url::parse(&self.spec)
                .map(SpecLocation::Url)
                .map_err(|_| {
                    self.error(
                        "spec",
                        "the spec is not a valid URL",
                        "write an absolute http(s):// URL, or a file path",
                    )
                });
        }
        let path = Path::new(&self.spec);
        let path = match Path::new(&self.origin).parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_owned(),
        };
        Ok(SpecLocation::File(path))
    }

    fn error(&self, field: &str, problem: &str, fix: &str) -> DeclarationError {
        DeclarationError::new(&self.origin, field, problem, fix)
    }

    /// Expands the credentials with `expand` (which resolves `${NAME}`) and reads the
    /// document, giving the source. Every expanded credential is registered with
    /// [`crate::redact::register`] before anything is sent.
    ///
    /// Expansion happens before this returns, so the future does not hold `expand`.
    ///
    /// # Errors
    ///
    /// A `${NAME}` that does not expand, a document that cannot be read or is not OpenAPI 3
    /// JSON, a remote `$ref`, two operations with one tool name, an `operations` entry the
    /// document does not have, no usable base URL — all at once where they can be found
    /// together.
    pub fn open(
        &self,
        expand: &dyn Fn(&str) -> Result<String, ConfigError>,
    ) -> impl Future<Output = Result<OpenApiSource, Vec<DeclarationError>>> + Send + use<> {
        let prepared = self.prepare(expand);
        let declaration = self.clone();
        async move {
            let headers = prepared?;
            declaration.open_prepared(headers).await
        }
    }

    /// The headers every request carries, expanded, the bearer last as `Authorization`.
    fn prepare(
        &self,
        expand: &dyn Fn(&str) -> Result<String, ConfigError>,
    ) -> Result<reqwest::header::HeaderMap, Vec<DeclarationError>> {
        let mut faults = Vec::new();
        let mut secrets = Vec::new();
        let mut headers = reqwest::header::HeaderMap::new();
        let fix = "set it in the environment the host reads, or correct the reference";
        for (name, raw) in &self.headers {
            let field = format!("headers.{name}");
            // What each reference stands for is a secret wherever it appears.
            for piece in crate::config::pieces(raw).unwrap_or_default() {
                if let Piece::Reference(var) = piece
                    && let Ok(value) = expand(&format!("${{{var}}}"))
                {
                    secrets.push(value);
                }
            }
            let value = match expand(raw) {
                Ok(value) => value,
                Err(problem) => {
                    faults.push(self.error(&field, &problem.to_string(), fix));
                    continue;
                }
            };
            if crate::config::is_credential_name(name) {
                push_credential(&mut secrets, &value);
            }
            match header(name, &value) {
                Some((name, value)) => {
                    headers.insert(name, value);
                }
                None => faults.push(self.error(
                    &field,
                    "the expanded value is not a valid header value",
                    "make the variable hold one line of text",
                )),
            }
        }
        if let Some(bearer) = &self.bearer {
            match expand(bearer.unexpanded()) {
                Ok(token) if token.trim().is_empty() => {
                    faults.push(self.error("bearer", "the bearer expands to nothing", fix));
                }
                Ok(token) => {
                    let value = format!("Bearer {token}");
                    secrets.push(token);
                    secrets.push(value.clone());
                    match header("Authorization", &value) {
                        Some((name, value)) => {
                            headers.insert(name, value);
                        }
                        None => faults.push(self.error(
                            "bearer",
                            "the expanded bearer is not a valid header value",
                            "make the variable hold one line of text",
                        )),
                    }
                }
                Err(problem) => faults.push(self.error("bearer", &problem.to_string(), fix)),
            }
        }
        crate::redact::register(&secrets);
        if faults.is_empty() {
            Ok(headers)
        } else {
            Err(faults)
        }
    }

    async fn open_prepared(
        self,
        headers: reqwest::header::HeaderMap,
    ) -> Result<OpenApiSource, Vec<DeclarationError>> {
        let location = self.location().map_err(|e| vec![e])?;
        let bug = |problem: OpenError| {
            vec![self.error("spec", &problem.to_string(), "report this as a bug")]
        };
        let timeout = Duration::from_millis(self.timeout_ms);
        let (bytes, shown) = load(&client(None).map_err(bug)?, &location, timeout)
            .await
            .map_err(|problem| {
                vec![self.error(
                    "spec",
                    &problem.to_string(),
                    "point `spec` at a readable OpenAPI document",
                )]
            })?;
        let value = parse_document(&bytes, &shown)?;
        let Document {
            version,
            server,
            operations,
        } = document::read(
            &value,
            &shown,
            &self.origin,
            self.operations.as_deref(),
            Bounds {
                tool_bytes: self.max_tool_bytes,
                catalog_bytes: self.max_catalog_bytes,
            },
        )?;
        let (base_url, rule) = self.base_url(server.as_deref(), &location, !headers.is_empty())?;
        let client = client(rule.clone()).map_err(bug)?;
        if self.version.is_some() && self.version != version {
            // Opening still succeeds: the tools are what the document says now; `check` reports it.
            tracing::warn!(source = %self.name, declared = ?self.version, document = ?version, "the OpenAPI document is not the version the declaration was written against");
        }
        let operations = operations
            .into_iter()
            .map(|op| (op.tool.name.clone(), Arc::new(op)))
            .collect();
        Ok(OpenApiSource {
            name: self.name,
            version,
            base_url,
            headers,
            timeout,
            max_response_bytes: self.max_response_bytes,
            operations,
            client,
            rule,
        })
    }

    /// The declared base URL, else the document's first server resolved against its URL;
    /// and the address rule requests to it meet, when the document chose another origin than
    /// the operator's.
    ///
    /// `credentials` says whether requests carry declared headers or a bearer: those go only
    /// to `baseUrl` or to the spec URL's own origin, so a document read from a file, or one
    /// naming another origin, is refused then, with `baseUrl` as the fix. Sending them nowhere
    /// instead would turn every call into the API's 401 with no word of why.
    fn base_url(
        &self,
        server: Option<&str>,
        location: &SpecLocation,
        credentials: bool,
    ) -> Result<(reqwest::Url, Option<AddressRule>), Vec<DeclarationError>> {
        let fix = "write `baseUrl`, the API's absolute http(s):// URL";
        let url = match (&self.base_url, server, location) {
            (Some(url), _, _) => {
                return match reqwest::Url::parse(url) {
                    Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => {
                        Ok((url, None))
                    }
                    _ => Err(vec![self.error(
                        "baseUrl",
                        "not an absolute http(s):// URL",
                        fix,
                    )]),
                };
            }
            (None, Some(server), SpecLocation::Url(spec)) => spec.join(server),
            (None, Some(server), SpecLocation::File(_)) => reqwest::Url::parse(server),
            (None, None, _) => {
                return Err(vec![self.error(
                    "baseUrl",
                    "the document names no servers and no baseUrl is given",
                    fix,
                )]);
            }
        };
        let url = match url {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => url,
            _ => return Err(vec![self.error("spec", "the API's base URL is not an absolute http(s):// URL (a document read from a file can only name absolute servers)", fix)]),
        };
        let SpecLocation::Url(spec) = location else {
            if credentials {
                return Err(vec![self.error(
                    "baseUrl",
                    &format!(
                        "the document, read from a file, names the API's server ({}), and the declared headers and bearer go only where the declaration names",
                        url.origin().ascii_serialization()
                    ),
                    "write `baseUrl` with the API's URL, the origin that is to receive the credentials",
                )]);
            }
            // The file is the operator's: what it names is theirs too.
            return Ok((url, None));
        };
        if url.origin() == spec.origin() {
            return Ok((url, None));
        }
        if credentials {
            return Err(vec![self.error(
                "baseUrl",
                &format!(
                    "the document's servers[0].url is another origin ({}) than the spec URL's ({}), and the declared headers and bearer go only where the declaration names",
                    url.origin().ascii_serialization(),
                    spec.origin().ascii_serialization()
                ),
                "write `baseUrl` with the API's URL if that origin is to receive the credentials",
            )]);
        }
        let rule = AddressRule::of(spec);
        if !rule.allows_url(&url) {
            return Err(vec![self.error(
                "spec",
                &format!(
                    "the document's servers[0].url names an address requests may not reach ({}): from a spec URL that is not of its class, a loopback or private address is refused, and a link-local or reserved one always",
                    url.origin().ascii_serialization()
                ),
                "write `baseUrl` with the API's URL if it is meant to be reached",
            )]);
        }
        Ok((url, Some(rule)))
    }

    /// Whether the document is there, and whether it is the version this declaration was
    /// written against. A URL gets 5 s to answer.
    pub async fn check(&self) -> Finding {
        let location = match self.location() {
            Ok(location) => location,
            Err(fault) => return Finding::Missing(fault.to_string()),
        };
        let client = match client(None) {
            Ok(client) => client,
            Err(problem) => return Finding::Missing(problem.to_string()),
        };
        let (bytes, shown) = match load(&client, &location, CHECK_TIMEOUT).await {
            Ok(loaded) => loaded,
            Err(problem) => return Finding::Missing(problem.to_string()),
        };
        let installed = match parse_document(&bytes, &shown) {
            Ok(value) => value
                .pointer("/info/version")
                .and_then(Value::as_str)
                .map(str::to_owned),
            Err(faults) => return Finding::Missing(super::said(&faults)),
        };
        match (&self.version, installed) {
            (Some(declared), Some(installed)) if *declared != installed => Finding::VersionDrift {
                declared: declared.clone(),
                installed,
            },
            (Some(declared), None) => Finding::VersionDrift {
                declared: declared.clone(),
                installed: "(no info.version)".to_owned(),
            },
            (_, installed) => Finding::Ready(format!(
                "{shown}, info.version {}",
                installed.as_deref().unwrap_or("(none)")
            )),
        }
    }
}

impl fmt::Debug for OpenApiDeclaration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenApiDeclaration")
            .field("name", &self.name)
            .field("spec", &self.spec)
            .field(
                "base_url",
                &self.base_url.as_deref().map(crate::config::redact_url),
            )
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("bearer", &self.bearer)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("max_tool_bytes", &self.max_tool_bytes)
            .field("max_catalog_bytes", &self.max_catalog_bytes)
            .field("operations", &self.operations)
            .field("version", &self.version)
            .field("origin", &self.origin)
            .finish()
    }
}

/// Collects a declaration's faults.
struct Faults<'o> {
    origin: &'o str,
    list: Vec<DeclarationError>,
}

impl Faults<'_> {
    fn push(&mut self, field: &str, problem: &str, fix: &str) {
        self.list
            .push(DeclarationError::new(self.origin, field, problem, fix));
    }

    /// The field `key` of `object` as a `T`, recording a fault when it is of the wrong type
    /// or `required` and absent.
    fn field<T: serde::de::DeserializeOwned>(
        &mut self,
        object: &Map<String, Value>,
        key: &str,
        required: bool,
        expected: &str,
    ) -> Option<T> {
        match object.get(key) {
            None | Some(Value::Null) if required => {
                self.push(key, "missing", &format!("write {expected}"));
                None
            }
            None | Some(Value::Null) => None,
            Some(value) => match T::deserialize(value) {
                Ok(value) => Some(value),
                Err(_) => {
                    self.push(key, "of the wrong type", &format!("write {expected}"));
                    None
                }
            },
        }
    }
}

/// The faults of the name, the spec and the base URL.
fn target_faults(
    faults: &mut Faults<'_>,
    name: &Option<String>,
    spec: &Option<String>,
    base_url: &Option<String>,
) {
    if let Some(name) = &name
        && !crate::config::is_valid_alias(name)
    {
        faults.push("name", &format!("{name:?} is not a valid name"), "write [a-z][a-z0-9-]*, not a reserved name such as \"enabled\" nor one ending in a companion word such as \"-tools\"");
    }
    if let Some(spec) = &spec {
        if spec.trim().is_empty() {
            faults.push(
                "spec",
                "the spec is empty",
                "write a file path or an http(s):// URL",
            );
        } else if looks_like_url(spec) && reqwest::Url::parse(spec).is_err() {
            faults.push(
                "spec",
                "the spec is not a valid URL",
                "write an absolute http(s):// URL, or a file path",
            );
        }
    }
    if let Some(url) = &base_url
        && !crate::config::is_absolute_http_url(url)
    {
        faults.push(
            "baseUrl",
            "not an absolute http(s):// URL",
            "write the API's base URL, such as https://api.example.com/v1",
        );
    }
}

/// The faults of the headers and the bearer: names, values, and how credentials are written.
fn credential_faults(
    faults: &mut Faults<'_>,
    headers: &BTreeMap<String, String>,
    bearer: &Option<String>,
    written: Written,
) {
    let mut seen = std::collections::BTreeSet::new();
    for (header, value) in headers {
        let field = format!("headers.{header}");
        if crate::config::invalid_header_name(header).is_some() {
            faults.push(
                &field,
                "not a valid HTTP header name",
                "write a header name of letters, digits and -",
            );
            continue;
        }
        let lower = header.to_ascii_lowercase();
        if crate::config::is_reserved_header(header) {
            faults.push(&field, "the request sets this header itself", "remove it");
        }
        if !seen.insert(lower.clone()) {
            faults.push(
                &field,
                "the header is given twice (names ignore case)",
                "keep one of them",
            );
        }
        if lower == "authorization" && bearer.is_some() {
            faults.push(
                &field,
                "an Authorization header and a bearer both set Authorization",
                "keep one of them",
            );
        }
        if !crate::config::is_valid_header_value(value) {
            faults.push(
                &field,
                "the value holds a line break or control character",
                "write the value on one line",
            );
        }
        if written == Written::Expanded {
            continue;
        }
        match crate::config::pieces(value) {
            Err(_) => faults.push(
                &field,
                "a malformed ${NAME} reference",
                "write references as ${NAME} with NAME of letters, digits and _",
            ),
            Ok(pieces) => {
                let referenced = pieces.iter().any(|p| matches!(p, Piece::Reference(_)));
                if crate::config::is_credential_name(header) && !referenced {
                    faults.push(&field, "a credential is written literally in a credential-named header", "put the credential in the environment and write ${NAME} (for example \"Token ${API_TOKEN}\")");
                }
            }
        }
    }
    if let Some(bearer) = &bearer
        && written == Written::AsDeclared
        && !crate::config::is_single_reference(bearer)
    {
        faults.push(
            "bearer",
            "the bearer is not exactly one ${NAME} reference",
            "put the credential in the environment and write ${NAME}, such as \"${API_TOKEN}\"",
        );
    }
}

/// The faults of the deadline, the byte bounds (response, tool, catalog) and `operations`.
fn bound_faults(
    faults: &mut Faults<'_>,
    timeout_ms: Option<u64>,
    bytes: [Option<usize>; 3],
    operations: &Option<Vec<String>>,
) {
    if timeout_ms == Some(0) {
        faults.push(
            "timeoutMs",
            "the deadline is zero",
            "write a positive number of milliseconds (default 30000)",
        );
    }
    let fields = ["maxResponseBytes", "maxToolBytes", "maxCatalogBytes"];
    let defaults = [
        DEFAULT_MAX_RESPONSE_BYTES,
        DEFAULT_MAX_TOOL_BYTES,
        DEFAULT_MAX_CATALOG_BYTES,
    ];
    for ((field, bound), default) in fields.into_iter().zip(bytes).zip(defaults) {
        if bound == Some(0) {
            faults.push(
                field,
                "the bound is zero",
                &format!("write a positive number of bytes (default {default})"),
            );
        }
    }
    for (i, id) in operations.iter().flatten().enumerate() {
        if id.trim().is_empty() {
            faults.push(
                &format!("operations[{i}]"),
                "an empty operationId",
                "name an operation by its operationId",
            );
        }
    }
}

/// A value and, for `Authorization`-style values, the credential after the scheme word.
fn push_credential(secrets: &mut Vec<String>, value: &str) {
    if let Some((scheme, credential)) = value.split_once(' ')
        && !scheme.is_empty()
        && scheme.bytes().all(|b| b.is_ascii_alphabetic())
    {
        secrets.push(credential.trim().to_owned());
    }
    secrets.push(value.to_owned());
}

fn header(
    name: &str,
    value: &str,
) -> Option<(reqwest::header::HeaderName, reqwest::header::HeaderValue)> {
    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).ok()?;
    let mut value = reqwest::header::HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some((name, value))
}

fn looks_like_url(spec: &str) -> bool {
    let lower = spec.trim_start().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// The HTTP client of a source: same-origin redirects only; names resolved under `rule`
/// when the document chose the origin; each request sets its deadline.
fn client(rule: Option<AddressRule>) -> Result<reqwest::Client, OpenError> {
    let mut builder = reqwest::Client::builder().redirect(crate::protocol::same_origin_redirects());
    if let Some(rule) = rule {
        builder = builder.dns_resolver(Arc::new(rule));
    }
    builder.build().map_err(OpenError::HttpClient)
}

/// The document's bytes and how to name it in errors, read within `timeout` and
/// [`MAX_DOCUMENT_BYTES`]. The document is fetched without the declared credentials: they
/// are for the API, whose origin may differ.
///
/// # Errors
///
/// The file unreadable or too large; the URL unreachable, answering an error status, too
/// large or too slow: what is said of the URL and of the network is scrubbed.
async fn load(
    client: &reqwest::Client,
    location: &SpecLocation,
    timeout: Duration,
) -> Result<(Vec<u8>, String), OpenError> {
    match location {
        SpecLocation::File(path) => {
            let read = async {
                let file = tokio::fs::File::open(path).await?;
                let mut bytes = Vec::new();
                file.take(MAX_DOCUMENT_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
                    .await?;
                Ok::<_, std::io::Error>(bytes)
            };
            let bytes = read.await.map_err(|source| OpenError::SpecFileUnreadable {
                path: path.clone(),
                source,
            })?;
            if bytes.len() > MAX_DOCUMENT_BYTES {
                return Err(OpenError::SpecFileTooLarge {
                    path: path.clone(),
                    limit: MAX_DOCUMENT_BYTES,
                });
            }
            Ok((bytes, path.display().to_string()))
        }
        SpecLocation::Url(url) => {
            // What an error shows of the URL and of what the network said: never a
            // registered secret.
            let scrubbed = |text: &str| crate::redact::scrub(text).into_owned();
            let shown = || scrubbed(url.as_str());
            let fetch = async {
                let response = client.get(url.clone()).send().await.map_err(|error| {
                    OpenError::SpecUrlUnreachable {
                        url: shown(),
                        problem: scrubbed(&describe(&error)),
                    }
                })?;
                let status = response.status();
                if !status.is_success() {
                    return Err(OpenError::SpecUrlStatus {
                        url: shown(),
                        status,
                    });
                }
                read_bounded(response, MAX_DOCUMENT_BYTES)
                    .await
                    .map_err(|bound| match bound {
                        Bounded::TooLarge => OpenError::SpecUrlTooLarge {
                            url: shown(),
                            limit: MAX_DOCUMENT_BYTES,
                        },
                        Bounded::Failed(problem) => OpenError::SpecUrlUnreachable {
                            url: shown(),
                            problem: scrubbed(&problem),
                        },
                    })
            };
            let bytes = tokio::time::timeout(timeout, fetch).await.map_err(|_| {
                OpenError::SpecUrlTimeout {
                    url: shown(),
                    timeout_ms: timeout.as_millis(),
                }
            })??;
            Ok((bytes, url.to_string()))
        }
    }
}

/// The document as JSON, with an error that says to convert YAML.
fn parse_document(bytes: &[u8], shown: &str) -> Result<Value, Vec<DeclarationError>> {
    serde_json::from_slice(bytes).map_err(|error| {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        let (problem, fix) = if matches!(first, Some(b'{' | b'[')) || first.is_none() {
            (format!("the document is not valid JSON ({error})"), "fix the document, or point `spec` at a valid one")
        } else {
            (
                "the document is not JSON (YAML, perhaps), and only JSON documents are read".to_owned(),
                "convert it to JSON (for example `yq -o=json . openapi.yaml > openapi.json`) and point `spec` at that",
            )
        };
        vec![DeclarationError::new(shown, "(document)", problem, fix)]
    })
}

/// The tools the document in `bytes` offers under `bounds`, or every fault of it: what
/// opening a source reads from its document, without a declaration or the network. The
/// fuzz targets drive it; not part of the API.
#[doc(hidden)]
pub fn document_tools(
    bytes: &[u8],
    bounds: Bounds,
) -> Result<Vec<SourceTool>, Vec<DeclarationError>> {
    let value = parse_document(bytes, "(document)")?;
    let document = document::read(&value, "(document)", "(document)", None, bounds)?;
    Ok(document.operations.into_iter().map(|op| op.tool).collect())
}
