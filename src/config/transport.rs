//! How a server is reached: the stdio, HTTP and tool-source definitions and the Transport
//! that holds one, printed and serialized with every secret value redacted.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Serialize, Serializer};

use super::authorization::Authorization;
use super::secret::REDACTED;
use super::secret::Secret;
use super::target;
use super::target::TransportKind;

/// How to start a stdio server. All strings unexpanded.
#[derive(Clone, PartialEq, Eq, Default, Serialize)]
pub struct StdioDefinition {
    /// One exact executable, never split on white space and never run through a shell.
    pub command: String,
    /// The argument array.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The working directory, when not the host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Variables added to the child's environment. Values may be secrets and are
    /// never printed.
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "serialize_redacted_values"
    )]
    pub env: BTreeMap<String, String>,
    /// The sandbox it runs in; `None` takes the host-wide policy (`PLURNK_MCP_SANDBOX`) or
    /// the built-in default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<super::sandbox::SandboxPolicy>,
}

impl StdioDefinition {
    /// A command with no arguments, working directory or environment.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            ..Self::default()
        }
    }
}

/// How to reach a Streamable HTTP server. All strings unexpanded.
#[derive(Clone, PartialEq, Eq, Default, Serialize)]
pub struct HttpDefinition {
    /// The absolute `http://` or `https://` endpoint. Printed only as its origin.
    #[serde(serialize_with = "serialize_url")]
    pub url: String,
    /// How requests are authorized; `None` sends no credential of its own.
    /// [`Authorization::Bearer`] is what `PLURNK_MCP_<server>_BEARER` configures
    /// and is sent as `Authorization: Bearer <token>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization: Option<Authorization>,
    /// Supplementary request headers. Values may be secrets and are never printed.
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "serialize_redacted_values"
    )]
    pub headers: BTreeMap<String, String>,
}

impl HttpDefinition {
    /// An endpoint with no credential or extra headers.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }

    /// The bearer credential, when the authorization is [`Authorization::Bearer`].
    pub fn bearer(&self) -> Option<&Secret> {
        match &self.authorization {
            Some(Authorization::Bearer { token }) => Some(token),
            _ => None,
        }
    }
}

/// A server's transport and its connection parameters.
///
/// Serializes as the `transport` discriminator of the `McpServerDefinition`
/// wire shape (`"stdio"` or `"http"`) beside the variant's fields; an in-process server
/// shows as `"in-process"` and has no wire definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "transport", rename_all = "kebab-case")]
pub enum Transport {
    /// A child process.
    Stdio(StdioDefinition),
    /// Streamable HTTP.
    Http(HttpDefinition),
    /// A server the embedder serves inside its own process
    /// ([`HostOptions::in_process`](crate::HostOptions::in_process)).
    InProcess,
    /// A tool source ([`crate::sources`]): a program, a script or an OpenAPI document,
    /// served to the host in-process.
    Source(SourceDefinition),
}

/// A tool source as declared: its kind and the declaration object as written (unexpanded;
/// `${NAME}` references expand only while a connection is prepared).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceDefinition {
    /// What kind of source it is (`cli`, `script` or `openapi`).
    pub kind: TransportKind,
    /// The declaration, validated by its kind's reader.
    pub declaration: std::sync::Arc<serde_json::Value>,
    /// Where it was declared (a file, or the action that added it), for messages.
    #[serde(skip)]
    pub origin: String,
}

impl Transport {
    /// Which transport this is.
    pub fn kind(&self) -> TransportKind {
        match self {
            Self::Stdio(_) => TransportKind::Stdio,
            Self::Http(_) => TransportKind::Http,
            Self::InProcess => TransportKind::InProcess,
            Self::Source(source) => source.kind,
        }
    }
}

/// Prints `<redacted>` without quotes.
struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A map's keys with every value redacted.
pub(crate) struct RedactedValues<'a, K>(pub(crate) &'a [K]);

impl<K: fmt::Debug> fmt::Debug for RedactedValues<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|k| (k, Redacted)))
            .finish()
    }
}

impl fmt::Debug for StdioDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env_keys: Vec<&String> = self.env.keys().collect();
        f.debug_struct("StdioDefinition")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("env", &RedactedValues(&env_keys))
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

impl fmt::Debug for HttpDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&String> = self.headers.keys().collect();
        f.debug_struct("HttpDefinition")
            .field("url", &target::redact_url(&self.url))
            .field("authorization", &self.authorization)
            .field("headers", &RedactedValues(&header_names))
            .finish()
    }
}

fn serialize_redacted_values<S: Serializer>(
    map: &BTreeMap<String, String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(map.keys().map(|k| (k, REDACTED)))
}

fn serialize_url<S: Serializer>(url: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&target::redact_url(url))
}
